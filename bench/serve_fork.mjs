// Snapshots and fork of `sbx serve` through the official `e2b` npm SDK: a
// parent that wrote SIZE MiB of random data, then R rounds of
// sandbox.createSnapshot() and sandbox.fork({count: N}), timed on the client
// (the snapshot deleted and the children killed outside the timed span), with
// the server's CPU time (utime + stime of PID, from /proc) over each call.
//
//   node bench/serve_fork.mjs SDK_PREFIX --pid SERVER_PID [--rounds 7] [--n 8] [--mb 100]
//
// Environment as for the SDK: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const prefix = args.shift();
const opt = { pid: 0, rounds: 7, n: 8, mb: 100 };
while (args.length) {
  const k = args.shift().replace(/^--/, '');
  if (!(k in opt)) {
    console.error(`serve_fork: unknown option --${k}`);
    process.exit(2);
  }
  opt[k] = Number(args.shift());
}
if (!prefix || !opt.pid) {
  console.error('usage: node serve_fork.mjs SDK_PREFIX --pid SERVER_PID [--rounds 7] [--n 8] [--mb 100]');
  process.exit(2);
}
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
const HZ = 100; // USER_HZ on Linux
function cpuMs() {
  const f = readFileSync(`/proc/${opt.pid}/stat`, 'utf8');
  const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(v[11]) + Number(v[12])) * 1000) / HZ; // utime, stime
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const p = await Sandbox.create({ timeoutMs: 3_600_000 });
await p.commands.run(`head -c ${opt.mb << 20} /dev/urandom > /tmp/big && sync`);
const snap = { ms: [], cpu: [] }, fork = { ms: [], cpu: [] };
for (let r = 0; r < opt.rounds; r++) {
  let c0 = cpuMs(), t0 = performance.now();
  const s = await p.createSnapshot();
  snap.ms.push(performance.now() - t0);
  snap.cpu.push(cpuMs() - c0);
  await Sandbox.deleteSnapshot(s.snapshotId);
  c0 = cpuMs();
  t0 = performance.now();
  const kids = await p.fork({ count: opt.n, timeoutMs: 600_000 });
  fork.ms.push(performance.now() - t0);
  fork.cpu.push(cpuMs() - c0);
  for (const k of kids) if (k instanceof Error) throw k;
  await Promise.all(kids.map((k) => Sandbox.kill(k.sandboxId)));
}
await Sandbox.kill(p.sandboxId);
const row = (name, x) =>
  `| ${name} | ${median(x.ms).toFixed(1)} ms | ${Math.min(...x.ms).toFixed(1)} / ${Math.max(...x.ms).toFixed(1)} ms | ${median(x.cpu).toFixed(0)} ms |`;
console.log(`e2b@${VERSION}, ${opt.rounds} rounds, parent wrote ${opt.mb} MiB`);
console.log('| through the SDK | median | min / max | server CPU (median) |');
console.log('|---|---|---|---|');
console.log(row('createSnapshot()', snap));
console.log(row(`fork({count: ${opt.n}})`, fork));
