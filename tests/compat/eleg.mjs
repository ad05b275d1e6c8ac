// The reference framework's E2B leg, end to end on `sbx serve` (issue 17's
// acceptance; docs/server.md, "The E2B-leg pattern"). For every bundled task,
// as an RL trainer's E2B leg does it with the unmodified `e2b` SDK:
//
//   Sandbox.create(<the task's template>)
//   files.write the environment server (tests/integration/envhelper, static)
//   commands.run('envhelper --port 8000 ...', {background: true})
//   GET  http://<getHost(8000)>/health           until it answers
//   WS   ws://<getHost(8000)>/ws                 (the `ws` package)
//     reset → step exec (the oracle: solution/ uploaded to /solution,
//     solve.sh run) → tests/ uploaded to /tests → step evaluate → reward
//
// Every oracle episode must score reward 1 with a canonical verdict
// (info.harness "tests/test.sh", no error); a deliberately wrong solution
// must score 0 (so this test can fail); a verifier that writes no reward
// must be no verdict (reward null, not 0); a ping sent while a step runs must
// be answered before the step's reply (the route relays both ways at once).
//
//   node eleg.mjs SDK_PREFIX WS_PREFIX TASKS_DIR IMAGES_JSON
//
// SDK_PREFIX/node_modules/e2b and WS_PREFIX/node_modules/ws (install.sh);
// IMAGES_JSON maps task name -> template (`sbx bake` output, eleg.sh).
// Environment: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; SBX_ENVHELPER (the
// helper binary); ELEG_CONCURRENCY (episodes at a time, default 3);
// ELEG_TASKS (comma list, default all of IMAGES_JSON).
// Prints a line per episode with its times, then
// "e2b-leg e2b@VER: N passed, N failed, N skipped"; exit 0 when nothing failed.
import { createRequire } from 'node:module';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import http from 'node:http';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const [prefix, wsPrefix, tasksDir, imagesJson] = process.argv.slice(2);
if (!imagesJson || !process.env.E2B_API_URL || !process.env.E2B_SANDBOX_URL || !process.env.E2B_API_KEY) {
  console.error('usage: E2B_API_URL=.. E2B_SANDBOX_URL=.. E2B_API_KEY=.. SBX_ENVHELPER=.. ' +
    'node eleg.mjs SDK_PREFIX WS_PREFIX TASKS_DIR IMAGES_JSON');
  process.exit(2);
}
const pkgDir = join(prefix, 'node_modules', 'e2b');
const req = createRequire(join(prefix, 'package.json'));
const VERSION = req(join(pkgDir, 'package.json')).version;
let e2b;
try {
  const esm = join(pkgDir, 'dist', 'index.mjs');
  if (!existsSync(esm)) throw new Error('no ESM build');
  e2b = await import(pathToFileURL(esm).href);
  if (typeof e2b.Sandbox !== 'function') throw new Error('no Sandbox export');
} catch {
  e2b = req('e2b'); // the ESM build of some 2.x releases fails under Node 20
}
const { Sandbox } = e2b;
const WebSocket = createRequire(join(wsPrefix, 'package.json'))('ws');
const TAG = `e2b-leg e2b@${VERSION}`;
const PORT = 8000;
const HELPER = '/opt/envhelper/envhelper';

const helperPath = process.env.SBX_ENVHELPER;
if (!helperPath || !existsSync(helperPath)) {
  console.log(`FAIL setup: SBX_ENVHELPER (tests/integration/envhelper, built by meson) is not set or missing: ${helperPath}`);
  console.log(`${TAG}: 0 passed, 1 failed, 0 skipped`);
  process.exit(1);
}
const helperBin = toArrayBuffer(readFileSync(helperPath));
const images = JSON.parse(readFileSync(imagesJson, 'utf8'));
const only = (process.env.ELEG_TASKS || '').split(',').filter(Boolean);
const taskNames = Object.keys(images).filter((t) => !only.length || only.includes(t)).sort();
const concurrency = Math.max(1, Number(process.env.ELEG_CONCURRENCY || 3));

let passed = 0, failed = 0;
function pass(name, detail) {
  passed++;
  console.log(`PASS ${name}${detail ? `  ${detail}` : ''}`);
}
function fail(name, err) {
  failed++;
  console.log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`);
}
function ok(cond, what) {
  if (!cond) throw new Error(what);
}
function toArrayBuffer(b) {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
}
const shq = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;
const secs = (ms) => (ms / 1000).toFixed(1);

// A promise that rejects after MS with WHAT in the message (no hang without a reason).
function within(ms, what, p) {
  let t;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms / 1000} s`)), ms); }),
  ]);
}

// ---- the task, read as the Harbor connector does (docs/tasks.md) ----------------

// task.toml, the subset the bundled tasks use: [tables], key = "string" | number | bool.
function readToml(path) {
  const out = {};
  let table = out;
  readFileSync(path, 'utf8').split('\n').forEach((raw, i) => {
    const line = raw.replace(/^\s+|\s+$/g, '');
    if (!line || line.startsWith('#')) return;
    let m = /^\[([A-Za-z0-9_.-]+)\]$/.exec(line);
    if (m) {
      table = out;
      for (const k of m[1].split('.')) table = table[k] ??= {};
      return;
    }
    m = /^([A-Za-z0-9_-]+)\s*=\s*(.*?)\s*(#[^"]*)?$/.exec(line);
    if (!m) throw new Error(`${path}:${i + 1}: expected [table] or key = value, got ${JSON.stringify(raw)}`);
    const v = m[2];
    if (/^"([^"\\]|\\.)*"$/.test(v)) table[m[1]] = JSON.parse(v);
    else if (v === 'true' || v === 'false') table[m[1]] = v === 'true';
    else if (/^[+-]?\d+(\.\d+)?$/.test(v)) table[m[1]] = Number(v);
    else table[m[1]] = v; // arrays and the like: not used here
  });
  return out;
}

// Every file under DIR as {path: ROOT/<its path below BASE>, data}.
function filesUnder(dir, root, base = dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p, root, base));
    else out.push({ path: `${root}/${relative(base, p)}`, data: toArrayBuffer(readFileSync(p)) });
  }
  return out;
}

function loadTask(name) {
  const dir = join(tasksDir, name);
  const toml = readToml(join(dir, 'task.toml'));
  // the sandbox workdir: [environment].workdir, else the image's WORKDIR, else /
  let workdir = toml.environment?.workdir;
  if (!workdir) {
    const df = readFileSync(join(dir, 'environment', 'Dockerfile'), 'utf8');
    const w = [...df.matchAll(/^\s*WORKDIR\s+(\S+)\s*$/gim)].pop();
    workdir = w ? w[1] : '/';
  }
  const user = toml.verifier?.user ?? 'root';
  if (user !== 'root') throw new Error(`${name}: [verifier].user = ${user}: this test runs the verifier as root only`);
  return {
    name,
    workdir,
    instruction: readFileSync(join(dir, 'instruction.md'), 'utf8'),
    verifierTimeout: Number(toml.verifier?.timeout_sec ?? 600),
    verifierEnv: toml.verifier?.env ?? {},
    solutionEnv: toml.solution?.env ?? {},
    solution: filesUnder(join(dir, 'solution'), '/solution'),
    tests: filesUnder(join(dir, 'tests'), '/tests'),
  };
}

// ---- reaching getHost(port) ------------------------------------------------------

// What sslip.io / nip.io DNS would answer: the IPv4 address the name spells
// (the machine may be offline; tests/compat/ports.mjs does the same).
function sslipLookup(hostname, opts, cb) {
  if (typeof opts === 'function') cb = opts, opts = {};
  const m = /(\d+)[.-](\d+)[.-](\d+)[.-](\d+)\.(sslip|nip)\.io\.?$/i.exec(hostname);
  if (!m) return cb(Object.assign(new Error(`not an sslip.io name: ${hostname}`), { code: 'ENOTFOUND' }));
  const ip = m.slice(1, 5).join('.');
  if (opts && opts.all) cb(null, [{ address: ip, family: 4 }]);
  else cb(null, ip, 4);
}

function get(host, path) {
  const u = new URL(`http://${host}${path}`);
  return new Promise((resolve, reject) => {
    const r = http.request({ hostname: u.hostname, port: u.port || 80, path: u.pathname, lookup: sslipLookup, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
    r.setTimeout(10_000, () => r.destroy(new Error(`GET ${host}${path}: no answer in 10 s`)));
    r.on('error', reject);
    r.end();
  });
}

// The reference's wait_server_ready: GET /health until 200 (here every 100 ms,
// 60 s), unless the server's process (HANDLE, the SDK's CommandHandle) exits.
async function waitHealthy(host, handle) {
  let last = 'nothing';
  for (let i = 0; i < 600; i++) {
    if (handle.exitCode !== undefined && handle.exitCode !== null)
      throw new Error(`the environment server exited with code ${handle.exitCode} before http://${host}/health answered`);
    try {
      const r = await get(host, '/health');
      if (r.status === 200 && JSON.parse(r.body).status === 'healthy') return;
      last = `${r.status} ${r.body.slice(0, 200)}`;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the environment server at http://${host}/health was not healthy in 60 s (last: ${last})`);
}

// One OpenEnv session over WebSocket: call() sends a message and returns its reply.
function openSession(host) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${host}/ws`, { lookup: sslipLookup, perMessageDeflate: false, handshakeTimeout: 30_000 });
    const replies = [], waiters = [];
    let closed = null;
    ws.on('message', (data, isBinary) => {
      const text = data.toString();
      let msg;
      try {
        ok(!isBinary, 'a binary message');
        msg = JSON.parse(text);
      } catch (e) {
        msg = { type: 'bad', error: `${e.message}: ${text.slice(0, 200)}` };
      }
      if (waiters.length) waiters.shift().resolve(msg);
      else replies.push(msg);
    });
    ws.on('close', (code, reason) => {
      closed = `the WebSocket closed (code ${code}${reason.length ? `, ${reason}` : ''})`;
      while (waiters.length) waiters.shift().reject(new Error(closed));
    });
    ws.on('error', (e) => {
      closed = `WebSocket error: ${e.message}`;
      while (waiters.length) waiters.shift().reject(new Error(closed));
      reject(new Error(`ws://${host}/ws: ${e.message}`));
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`ws://${host}/ws: upgrade answered ${res.statusCode}`)));
    const next = () => {
      if (replies.length) return Promise.resolve(replies.shift());
      if (closed) return Promise.reject(new Error(closed));
      return new Promise((res, rej) => waiters.push({ resolve: res, reject: rej }));
    };
    ws.on('open', () => resolve({
      ws,
      // TEXT as sent (not JSON-encoded here), its reply as parsed, errors included
      raw(text) {
        ws.send(text);
        return within(30_000, `the reply to ${text.slice(0, 40)}`, next());
      },
      async call(msg, ms = 300_000) {
        ws.send(JSON.stringify(msg));
        const r = await within(ms, `${msg.type} ${msg.data?.action_type ?? ''}`.trim(), next());
        if (r.type === 'bad') throw new Error(`${msg.type}: ${r.error}`);
        if (r.type === 'error') throw new Error(`${msg.type}: ${r.data.code}: ${r.data.message}`);
        return r;
      },
      close() {
        return new Promise((res) => {
          if (ws.readyState === WebSocket.CLOSED) return res();
          ws.once('close', res);
          ws.send(JSON.stringify({ type: 'close' }));
          setTimeout(() => { ws.terminate(); res(); }, 5000);
        });
      },
    }));
  });
}

// ---- one episode -------------------------------------------------------------------

// SOLVE: 'oracle' (solution/solve.sh), 'wrong' (does nothing useful);
// EXTRA(session), when given, runs after the agent phase and returns the steps it took.
// Returns {reward, times}; throws with the phase that failed.
async function episode(task, solve, extra) {
  const t = { start: Date.now() };
  const sbx = await within(120_000, 'Sandbox.create', Sandbox.create(images[task.name], {
    timeoutMs: 900_000, metadata: { 'sbx-test': 'e2b-leg', task: task.name },
  }));
  let session;
  try {
    t.create = Date.now();
    // the environment server, as the reference starts tbench2_env in the sandbox
    await sbx.files.write(HELPER, helperBin, { user: 'root' });
    await sbx.files.write('/opt/envhelper/instruction.md', task.instruction, { user: 'root' });
    await sbx.commands.run(`chmod 755 ${HELPER}`, { user: 'root' });
    const argv = [HELPER, '--port', PORT, '--task', task.name, '--workdir', task.workdir,
      '--instruction', '/opt/envhelper/instruction.md', '--verifier-timeout', task.verifierTimeout,
      ...Object.entries(task.verifierEnv).flatMap(([k, v]) => ['--verifier-env', `${k}=${v}`])];
    const server = await sbx.commands.run(`${argv.map(shq).join(' ')} >/tmp/envhelper.log 2>&1`, { background: true, user: 'root' });
    const host = sbx.getHost(PORT);
    ok(host.startsWith(`${PORT}-${sbx.sandboxId}.`), `getHost(${PORT}) = ${host}`);
    try {
      await waitHealthy(host, server);
    } catch (e) {
      const log = await sbx.commands.run('cat /tmp/envhelper.log', { user: 'root' }).catch((x) => ({ stdout: `(${x.message})` }));
      throw new Error(`${e.message}; envhelper's log: ${log.stdout.trim() || '(empty)'}`);
    }
    session = await openSession(host);
    t.ready = Date.now();

    const reset = (await session.call({ type: 'reset', data: { task_id: task.name } })).data;
    ok(reset.observation.instruction === task.instruction, `reset: the observation's instruction is not instruction.md: ${JSON.stringify(reset.observation.instruction.slice(0, 80))}`);
    ok(reset.reward === 0 && reset.done === false, `reset: reward ${reset.reward}, done ${reset.done}`);
    t.reset = Date.now();

    // the agent phase: the oracle, as the Harbor connector runs it (solution/ → /solution)
    let cmd;
    if (solve === 'oracle') {
      await sbx.files.write(task.solution, { user: 'root' });
      const env = Object.entries({ DEBIAN_FRONTEND: 'noninteractive', ...task.solutionEnv }).map(([k, v]) => shq(`${k}=${v}`));
      cmd = `chmod +x /solution/solve.sh && env ${env.join(' ')} /solution/solve.sh`;
    } else {
      cmd = 'echo "a deliberately wrong solution: nothing done"';
    }
    const step = (await session.call({ type: 'step', data: { action_type: 'exec', command: cmd } })).data;
    const info = step.observation.info;
    ok(step.done === false && step.reward === null, `exec: reward ${step.reward}, done ${step.done}`);
    ok(info.exit_code === 0 && !info.timed_out,
      `the solution exited ${info.exit_code}${info.timed_out ? ' (timed out)' : ''}; its output: ${step.observation.output.slice(-1500)}`);
    t.solve = Date.now();
    const extraSteps = extra ? await extra(session) : 0;

    // the verifier: tests/ → /tests (wiped first: the agent may have planted one), then evaluate
    await sbx.commands.run('rm -rf /tests', { user: 'root' });
    await sbx.files.write(task.tests, { user: 'root' });
    const ev = (await session.call({ type: 'step', data: { action_type: 'evaluate' } }, (task.verifierTimeout + 60) * 1000)).data;
    const o = ev.observation;
    if (task.noVerdict) {
      // a verifier that wrote no reward: no verdict, never a false 0 (OpenEnv PR #1025)
      ok(ev.reward === null && ev.done === false && /^no verdict: /.test(o.error) && o.info?.harness === 'tests/test.sh',
        `evaluate without a reward file: reward ${ev.reward}, done ${ev.done}, error ${JSON.stringify(o.error)} (expected reward null, "no verdict: ...")`);
    } else {
      ok(o.info && o.info.harness === 'tests/test.sh' && o.error === '' && typeof ev.reward === 'number',
        `evaluate: not a canonical verdict (the reference drops such a sample): reward ${ev.reward}, error ${JSON.stringify(o.error)}, info ${JSON.stringify(o.info)}; verifier log tail: ${o.output.slice(-1500)}`);
      ok(ev.done === true, 'evaluate: done is not true');
    }
    t.verify = Date.now();
    const st = (await session.call({ type: 'state' })).data;
    ok(st.step_count === 2 + extraSteps && st.task_id === task.name, `state: ${JSON.stringify(st)}`);
    await session.close();
    session = null;
    return { reward: ev.reward, log: o.output, t };
  } finally {
    if (session) session.ws.terminate();
    await sbx.kill().catch(() => {});
  }
}

// ---- the sweep ---------------------------------------------------------------------

const results = {};
async function oracle(name) {
  let task;
  try {
    task = loadTask(name);
  } catch (e) {
    return fail(`${name}: oracle reward 1`, e);
  }
  try {
    const r = await episode(task, 'oracle');
    const t = r.t;
    results[name] = { total: t.verify - t.start };
    ok(r.reward === 1, `reward ${r.reward}, not 1; verifier log tail: ${r.log.slice(-1500)}`);
    pass(`${name}: oracle reward 1`, `create ${secs(t.create - t.start)} s, server up ${secs(t.ready - t.create)} s, ` +
      `reset ${secs(t.reset - t.ready)} s, solve ${secs(t.solve - t.reset)} s, verify ${secs(t.verify - t.solve)} s, ` +
      `total ${secs(t.verify - t.start)} s`);
  } catch (e) {
    fail(`${name}: oracle reward 1 (template ${images[name]})`, e);
  }
}

const t0 = Date.now();
const queue = [...taskNames];
await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
  while (queue.length) await oracle(queue.shift());
}));
const sweepMs = Date.now() - t0;
const good = Object.keys(results).length;
console.log(`     sweep: ${passed}/${taskNames.length} oracle episodes reward 1 in ${secs(sweepMs)} s at concurrency ${concurrency}`);

// The same pattern must be able to fail: a wrong solution scores 0.
const wrongTask = taskNames.includes('fix-c-build') ? 'fix-c-build' : taskNames[0];
if (wrongTask) {
  try {
    // and a ping sent while a step runs is answered before that step's reply
    const pingDuringStep = async (session) => {
      const order = [];
      const pong = new Promise((res) => session.ws.once('pong', () => { order.push('pong'); res(); }));
      const stepP = session.call({ type: 'step', data: { action_type: 'exec', command: 'sleep 1; echo slept' } })
        .then((r) => { order.push('reply'); return r; });
      await new Promise((r) => setTimeout(r, 200));
      session.ws.ping('during-step');
      const [r] = await Promise.all([stepP, within(30_000, 'pong', pong)]);
      ok(r.data.observation.output === 'slept\n', `the sleep step answered ${JSON.stringify(r.data.observation.output)}`);
      ok(order[0] === 'pong', `a ping sent during a 1 s step was answered after the step's reply (order: ${order})`);
      // bad messages get the documented error codes and change nothing
      for (const [text, code] of [['{"type":', 'INVALID_JSON'], ['{"type":"mcp"}', 'UNKNOWN_TYPE'],
        ['{"type":"step","data":{"action_type":"exec","command":""}}', 'VALIDATION_ERROR'],
        ['{"type":"step","data":{"action_type":"write_file"}}', 'VALIDATION_ERROR']]) {
        const e = await session.raw(text);
        ok(e.type === 'error' && e.data.code === code, `${text} answered ${JSON.stringify(e)}, expected error ${code}`);
      }
      return 1; // steps taken
    };
    const r = await episode(loadTask(wrongTask), 'wrong', pingDuringStep);
    ok(r.reward === 0, `a wrong solution got reward ${r.reward}, not 0`);
    pass(`${wrongTask}: a wrong solution scores reward 0 (and a ping during a step is answered first; bad messages get error codes)`);
  } catch (e) {
    fail(`${wrongTask}: a wrong solution scores reward 0`, e);
  }
}
// A verifier that writes no reward is no verdict (reward null), not 0.
if (wrongTask) {
  try {
    const task = { ...loadTask(wrongTask), noVerdict: true,
      tests: [{ path: '/tests/test.sh', data: '#!/bin/sh\necho "this verifier writes no reward"\n' }] };
    const r = await episode(task, 'oracle');
    ok(r.reward === null, `reward ${r.reward}`);
    pass(`${wrongTask}: a verifier that writes no reward is no verdict (reward null)`);
  } catch (e) {
    fail(`${wrongTask}: a verifier that writes no reward is no verdict (reward null)`, e);
  }
}
if (good < taskNames.length) console.log(`     ${taskNames.length - good} task(s) did not complete an episode`);
console.log(`${TAG}: ${passed} passed, ${failed} failed, 0 skipped`);
process.exit(failed ? 1 : 0);
