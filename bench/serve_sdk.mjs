// Benchmark of `sbx serve` through the official `e2b` npm SDK: one lifecycle is
// Sandbox.create() -> commands.run('true') -> kill(), timed on the client.
//
//   node bench/serve_sdk.mjs SDK_PREFIX [--seq N] [--conc C] [--total M]
//                            [--burst B] [--warmup W] [--template T] [--json FILE]
//
// Phases: W warm-up lifecycles (not counted); N sequential lifecycles; M
// lifecycles by C concurrent workers; then a create burst: B creates by C
// workers with nothing else running, the sandboxes killed after. Around the
// concurrent phase and the burst it reads the server's GET /metrics
// (Prometheus text): the creates the server completed and its own mean
// create time, so creates/s is the server's count over the phase's wall time. Environment as for the SDK: E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY. Prints a table; --json writes the raw numbers.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const prefix = args.shift();
if (!prefix) {
  console.error('usage: node serve_sdk.mjs SDK_PREFIX [--seq N] [--conc C] [--total M] [--burst B] [--warmup W] [--template T] [--json FILE]');
  process.exit(2);
}
const opt = { seq: 200, conc: 32, total: 320, burst: 128, warmup: 5, template: '', json: '' };
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

// Server-side view of a phase from two /metrics snapshots.
function serverSide(m0, m1, wall) {
  const c = /^sbx_serve_sandbox_creates_total(\{.*\})?$/;
  const out = { metrics: !!(m0 && m1) };
  const c0 = pick(m0, c);
  const c1 = pick(m1, c);
  if (c0 !== undefined && c1 !== undefined) {
    out.creates = c1 - c0;
    out.creates_per_s = out.creates / wall;
  }
  const s0 = pick(m0, /^sbx_serve_create_seconds_sum$/);
  const s1 = pick(m1, /^sbx_serve_create_seconds_sum$/);
  const n0 = pick(m0, /^sbx_serve_create_seconds_count$/);
  const n1 = pick(m1, /^sbx_serve_create_seconds_count$/);
  if ([s0, s1, n0, n1].every((x) => x !== undefined) && n1 > n0) out.create_mean_ms = ((s1 - s0) / (n1 - n0)) * 1000;
  return out;
}

// B creates by C workers, nothing else running; kills after the clock stops.
async function burst(n, conc) {
  const sbs = [];
  const errors = [];
  const lat = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        next++;
        const t = performance.now();
        try {
          sbs.push(opt.template ? await Sandbox.create(opt.template) : await Sandbox.create());
          lat.push(performance.now() - t);
        } catch (err) {
          errors.push(err?.message || String(err));
        }
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  let i = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (i < sbs.length) await sbs[i++].kill().catch((err) => errors.push(`kill: ${err.message}`));
    }),
  );
  return { n: sbs.length, errors, wall, create: stats(lat) };
}

console.log(`# e2b@${VERSION} against ${API}: warmup ${opt.warmup}, sequential ${opt.seq}, ${opt.total} at concurrency ${opt.conc}, burst of ${opt.burst} creates`);
await phase(opt.warmup, 1);
const seq = summarize('sequential', 1, await phase(opt.seq, 1));
const m0 = await metrics();
const cph = await phase(opt.total, opt.conc);
const m1 = await metrics();
const con = summarize(`concurrency ${opt.conc}`, opt.conc, cph);
con.server = serverSide(m0, m1, cph.wall);
let bst = { n: 0, errors: [], wall: 0 };
if (opt.burst > 0) {
  const b0 = await metrics();
  bst = await burst(opt.burst, opt.conc);
  const b1 = await metrics();
  bst.server = serverSide(b0, b1, bst.wall);
}

const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
console.log('');
console.log('| phase | n | errors | p50 ms | p99 ms | max ms | create p50 | run p50 | kill p50 | lifecycles/s |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of [seq, con])
  console.log(
    `| ${r.name} | ${r.n} | ${r.errors} | ${f(r.total.p50)} | ${f(r.total.p99)} | ${f(r.total.max)} | ${f(r.create.p50)} | ${f(r.run.p50)} | ${f(r.kill.p50)} | ${f(r.lifecycles_per_s)} |`,
  );
console.log('');
const sv = con.server;
console.log(`server, concurrent phase: ${sv.creates ?? 'n/a'} creates in ${f(cph.wall)} s = ${f(sv.creates_per_s)} creates/s; mean server-side create ${f(sv.create_mean_ms)} ms`);
if (opt.burst > 0) {
  const bs = bst.server;
  console.log(
    `server, create burst (${opt.burst} creates, ${opt.conc} at a time, no commands): ${bs.creates ?? 'n/a'} creates in ${f(bst.wall)} s = ${f(bs.creates_per_s)} creates/s; mean server-side create ${f(bs.create_mean_ms)} ms; client create p50 ${f(bst.create?.p50)} ms, p99 ${f(bst.create?.p99)} ms`,
  );
}
const allErrors = [...cph.errors, ...bst.errors];
if (seq.errors || allErrors.length) console.log(`errors (first 5): ${allErrors.slice(0, 5).join(' | ')}`);
const result = { sdk: VERSION, api: API, options: opt, sequential: seq, concurrent: con, burst: bst };
if (opt.json) writeFileSync(opt.json, JSON.stringify(result, null, 2) + '\n');
process.exit(seq.errors || con.errors || bst.errors.length ? 1 : 0);
