// Benchmark of `sbx serve` through the official `e2b` npm SDK: one lifecycle is
// Sandbox.create() -> commands.run('true') -> kill(), timed on the client.
//
//   node bench/serve_sdk.mjs SDK_PREFIX [--seq N] [--conc C] [--total M]
//                            [--warmup W] [--template T] [--json FILE]
//
// Phases: W warm-up lifecycles (not counted); N sequential lifecycles; M
// lifecycles by C concurrent workers. Before and after the concurrent phase it
// reads the server's GET /metrics (Prometheus text) to get the creates the
// server completed and its own create time, so creates/s is the server's
// count over the phase's wall time. Environment as for the SDK: E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY. Prints a table; --json writes the raw numbers.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const prefix = args.shift();
if (!prefix) {
  console.error('usage: node serve_sdk.mjs SDK_PREFIX [--seq N] [--conc C] [--total M] [--warmup W] [--template T] [--json FILE]');
  process.exit(2);
}
const opt = { seq: 200, conc: 32, total: 320, warmup: 5, template: '', json: '' };
while (args.length) {
  const k = args.shift().replace(/^--/, '');
  if (!(k in opt)) {
    console.error(`serve_sdk: unknown option --${k}`);
    process.exit(2);
  }
  opt[k] = typeof opt[k] === 'number' ? Number(args.shift()) : args.shift();
}
const API = (process.env.E2B_API_URL || '').replace(/\/+$/, '');
const KEY = process.env.E2B_API_KEY || '';

const req = createRequire(join(prefix, 'package.json'));
const pkg = join(prefix, 'node_modules', 'e2b');
const VERSION = req(join(pkg, 'package.json')).version;
let e2b;
try {
  e2b = await import(pathToFileURL(join(pkg, 'dist', 'index.mjs')).href);
} catch {
  e2b = req('e2b');
}
const { Sandbox } = e2b;

function pct(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return { n: s.length, p50: pct(s, 50), p90: pct(s, 90), p99: pct(s, 99), max: s[s.length - 1], mean };
}

// Prometheus text -> { name{labels}: value }.
async function metrics() {
  try {
    const res = await fetch(`${API}/metrics`, { headers: { 'X-API-KEY': KEY } });
    if (!res.ok) return null;
    const out = {};
    for (const line of (await res.text()).split('\n')) {
      if (!line || line.startsWith('#')) continue;
      const m = line.match(/^(\S+)\s+(\S+)/);
      if (m) out[m[1]] = Number(m[2]);
    }
    return out;
  } catch {
    return null;
  }
}
const pick = (m, re) => {
  if (!m) return undefined;
  for (const [k, v] of Object.entries(m)) if (re.test(k)) return v;
  return undefined;
};

async function lifecycle() {
  const t0 = performance.now();
  const sb = opt.template ? await Sandbox.create(opt.template) : await Sandbox.create();
  const t1 = performance.now();
  let t2;
  try {
    const r = await sb.commands.run('true');
    if (r.exitCode !== 0) throw new Error(`run('true') exit ${r.exitCode}`);
    t2 = performance.now();
  } finally {
    await sb.kill();
  }
  const t3 = performance.now();
  return { total: t3 - t0, create: t1 - t0, run: t2 - t1, kill: t3 - t2 };
}

async function phase(n, conc) {
  const samples = [];
  const errors = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        next++;
        try {
          samples.push(await lifecycle());
        } catch (err) {
          errors.push(err?.message || String(err));
        }
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  return { samples, errors, wall };
}

function summarize(name, conc, ph) {
  const col = (k) => stats(ph.samples.map((s) => s[k]));
  return {
    name,
    concurrency: conc,
    n: ph.samples.length,
    errors: ph.errors.length,
    wall_s: ph.wall,
    lifecycles_per_s: ph.samples.length / ph.wall,
    total: col('total'),
    create: col('create'),
    run: col('run'),
    kill: col('kill'),
  };
}

console.log(`# e2b@${VERSION} against ${API}: warmup ${opt.warmup}, sequential ${opt.seq}, ${opt.total} at concurrency ${opt.conc}`);
await phase(opt.warmup, 1);
const seq = summarize('sequential', 1, await phase(opt.seq, 1));
const m0 = await metrics();
const cph = await phase(opt.total, opt.conc);
const m1 = await metrics();
const con = summarize(`concurrency ${opt.conc}`, opt.conc, cph);
const creates0 = pick(m0, /^sbx_serve_creates_total$|^sbx_serve_creates_total\{/);
const creates1 = pick(m1, /^sbx_serve_creates_total$|^sbx_serve_creates_total\{/);
const server = {
  metrics: !!(m0 && m1),
  creates: creates1 !== undefined && creates0 !== undefined ? creates1 - creates0 : undefined,
};
if (server.creates !== undefined) server.creates_per_s = server.creates / cph.wall;
const sum0 = pick(m0, /create_seconds_sum/);
const sum1 = pick(m1, /create_seconds_sum/);
const cnt0 = pick(m0, /create_seconds_count/);
const cnt1 = pick(m1, /create_seconds_count/);
if ([sum0, sum1, cnt0, cnt1].every((x) => x !== undefined) && cnt1 > cnt0)
  server.create_mean_ms = ((sum1 - sum0) / (cnt1 - cnt0)) * 1000;

const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
console.log('');
console.log('| phase | n | errors | p50 ms | p99 ms | max ms | create p50 | run p50 | kill p50 | lifecycles/s |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of [seq, con])
  console.log(
    `| ${r.name} | ${r.n} | ${r.errors} | ${f(r.total.p50)} | ${f(r.total.p99)} | ${f(r.total.max)} | ${f(r.create.p50)} | ${f(r.run.p50)} | ${f(r.kill.p50)} | ${f(r.lifecycles_per_s)} |`,
  );
console.log('');
console.log(
  `server (GET /metrics over the concurrent phase): ${server.creates ?? 'n/a'} creates in ${f(cph.wall)} s = ${f(server.creates_per_s)} creates/s; server-side create mean ${f(server.create_mean_ms)} ms`,
);
if (cph.errors.length || seq.errors) {
  const all = [...cph.errors];
  console.log(`errors (first 5): ${all.slice(0, 5).join(' | ')}`);
}
const result = { sdk: VERSION, api: API, options: opt, sequential: seq, concurrent: con, server };
if (opt.json) writeFileSync(opt.json, JSON.stringify(result, null, 2) + '\n');
process.exit(seq.errors || con.errors ? 1 : 0);
