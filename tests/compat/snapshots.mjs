// Snapshots, fork and auto-resume with the unmodified `e2b` SDK
// (docs/server.md, "Snapshots, fork and auto-resume"):
// - createSnapshot → Sandbox.create(snapshotId): a file written before the
//   snapshot is there, one written after it is not; listSnapshots (static,
//   by sandbox, by name); a bad name is refused (400); deleteSnapshot (true,
//   then false), and a sandbox started from it keeps working after;
// - fork (count 3): every child has the parent's files, a write in one is
//   seen neither in the others nor in the parent, the parent keeps working;
// - lifecycle {onTimeout: 'pause', autoResume: true}: once the timeout has
//   paused it, commands.run succeeds and isRunning() is true again; without
//   autoResume the same call fails and it stays paused.
// Checks of what an SDK version lacks are skipped, saying so.
//
//   node snapshots.mjs SDK_PREFIX      (SDK_PREFIX/node_modules/e2b, from install.sh)
//
// Environment as for suite.mjs (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
// Ends with "snapshots e2b@VER: N passed, N failed, N skipped"; exit 0 when
// nothing failed. Timings: bench/serve_fork.sh.
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const prefix = process.argv[2];
if (!prefix || !process.env.E2B_API_URL || !process.env.E2B_SANDBOX_URL || !process.env.E2B_API_KEY) {
  console.error('usage: E2B_API_URL=.. E2B_SANDBOX_URL=.. E2B_API_KEY=.. node snapshots.mjs SDK_PREFIX');
  process.exit(2);
}
const API = process.env.E2B_API_URL.replace(/\/+$/, '');
const KEY = process.env.E2B_API_KEY;
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
const TAG = `snapshots e2b@${VERSION}`;
const SDK_SRC = readFileSync(join(pkgDir, 'dist', 'index.js'), 'utf8');
const RUN = `${process.pid}${Date.now().toString(36)}`;

let passed = 0, failed = 0, skipped = 0;
class Skip extends Error {}
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`PASS ${TAG} ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    if (err instanceof Skip) {
      skipped++;
      console.log(`SKIP ${TAG} ${name}: ${err.message}`);
    } else {
      failed++;
      console.log(`FAIL ${TAG} ${name}: ${err && err.stack ? err.stack : err}`);
    }
  }
}
const show = (v) => JSON.stringify(v);
function eq(a, b, what) {
  if (a !== b) throw new Error(`${what}: expected ${show(b)}, got ${show(a)}`);
}
function ok(cond, what) {
  if (!cond) throw new Error(what);
}
async function rejects(p, what) {
  try {
    const v = await p;
    throw new Error(`${what}: expected an error, got ${show(v)}`);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith(`${what}: expected an error`)) throw err;
    return err;
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what}: not true within ${ms / 1000} s`);
    await sleep(100);
  }
}
async function api(method, path, body) {
  const h = { 'X-API-KEY': KEY };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(API + path, { method, headers: h, body });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, json, text };
}
async function pages(p) {
  const out = [];
  for (let i = 0; i < 100 && p.hasNext; i++) out.push(...(await p.nextItems()));
  return out;
}

const created = new Set();
const snaps = new Set();
async function create(template, opts = {}) {
  const sb = template ? await Sandbox.create(template, { timeoutMs: 300_000, ...opts })
                      : await Sandbox.create({ timeoutMs: 300_000, ...opts });
  created.add(sb.sandboxId);
  return sb;
}
async function kill(sb) {
  await Sandbox.kill(sb.sandboxId);
  created.delete(sb.sandboxId);
}
const read = async (sb, path) => (await sb.commands.run(`cat ${path} 2>/dev/null || echo missing`)).stdout;

async function main() {
  const hasSnap = typeof Sandbox.createSnapshot === 'function';
  const hasFork = typeof Sandbox.fork === 'function';
  const hasLifecycle = SDK_SRC.includes('autoResume');

  await check('createSnapshot → create from it → listSnapshots → deleteSnapshot', async () => {
    if (!hasSnap) throw new Skip(`not applicable: SDK ${VERSION} lacks Sandbox.createSnapshot`);
    const p = await create();
    await p.files.write('/tmp/before', 'before-snapshot');
    const name = `compat-${RUN}`;
    const snap = await p.createSnapshot({ name });
    eq(snap.snapshotId, name, 'createSnapshot().snapshotId (the name given)');
    ok(Array.isArray(snap.names) && snap.names.includes(name), `createSnapshot().names has the name: ${show(snap.names)}`);
    snaps.add(snap.snapshotId);
    await p.files.write('/tmp/after', 'after-snapshot');
    const anon = await Sandbox.createSnapshot(p.sandboxId);
    ok(typeof anon.snapshotId === 'string' && anon.snapshotId.length > 0 && anon.snapshotId !== name,
       `createSnapshot() without a name gets its own id: ${show(anon)}`);
    snaps.add(anon.snapshotId);
    eq(await p.isRunning(), true, 'the sandbox runs on after createSnapshot');

    const c = await create(snap.snapshotId);
    eq(await read(c, '/tmp/before'), 'before-snapshot', 'a file written before the snapshot, in a sandbox made from it');
    eq(await read(c, '/tmp/after'), 'missing\n', 'a file written after the snapshot');
    const ci = await c.getInfo();
    eq(ci.templateId, snap.snapshotId, 'getInfo().templateId of a sandbox made from the snapshot');
    await c.commands.run('echo child > /tmp/child');
    eq(await read(p, '/tmp/child'), 'missing\n', "the snapshot's sandbox does not see the new one's writes");

    const all = (await pages(Sandbox.listSnapshots())).map((s) => s.snapshotId);
    ok(all.includes(name) && all.includes(anon.snapshotId), `listSnapshots() has both: ${show(all)}`);
    const mine = (await pages(p.listSnapshots())).map((s) => s.snapshotId).sort();
    eq(show(mine), show([name, anon.snapshotId].sort()), 'sandbox.listSnapshots() (by sandboxID)');
    const none = await pages(c.listSnapshots());
    eq(none.length, 0, 'listSnapshots() of a sandbox without snapshots');
    if (SDK_SRC.includes('name: _this15.name') || SDK_SRC.includes('name: this.name')) {
      const byName = (await pages(Sandbox.listSnapshots({ name }))).map((s) => s.snapshotId);
      eq(show(byName), show([name]), 'listSnapshots({name})');
    }
    const paged = Sandbox.listSnapshots({ limit: 1 });
    const first = await paged.nextItems();
    eq(first.length, 1, 'listSnapshots({limit: 1}) first page');
    ok(paged.hasNext, 'listSnapshots({limit: 1}) has a next page');
    const tmpl = await api('GET', '/templates');
    ok(tmpl.status === 200 && tmpl.json.some((t) => t.templateID === name), 'GET /templates lists the snapshot');

    const dup = await api('POST', `/sandboxes/${p.sandboxId}/snapshots`, JSON.stringify({ name }));
    eq(dup.status, 409, 'a second snapshot with the same name');
    const bad = await api('POST', `/sandboxes/${p.sandboxId}/snapshots`, JSON.stringify({ name: 'no spaces/or slashes' }));
    eq(bad.status, 400, 'a bad snapshot name');
    ok(/name/.test(bad.json?.message || ''), `the 400 names the field: ${bad.text}`);
    await rejects(p.createSnapshot({ name: '../x' }), 'createSnapshot with a bad name');

    eq(await Sandbox.deleteSnapshot(name), true, 'deleteSnapshot (in use by a sandbox made from it)');
    eq(await Sandbox.deleteSnapshot(name), false, 'deleteSnapshot again');
    snaps.delete(name);
    eq(await read(c, '/tmp/before'), 'before-snapshot', 'the sandbox made from it works after the delete');
    await rejects(Sandbox.create(name, { timeoutMs: 10_000 }), 'create from a deleted snapshot');
    eq(await Sandbox.deleteSnapshot(anon.snapshotId), true, 'deleteSnapshot of the unnamed one');
    snaps.delete(anon.snapshotId);
    const left = (await pages(Sandbox.listSnapshots())).map((s) => s.snapshotId);
    ok(!left.includes(name) && !left.includes(anon.snapshotId), `listSnapshots() after the deletes: ${show(left)}`);
    await kill(c);
    await kill(p);
  });

  await check('snapshot of a paused sandbox', async () => {
    if (!hasSnap) throw new Skip(`not applicable: SDK ${VERSION} lacks Sandbox.createSnapshot`);
    const p = await create();
    await p.files.write('/tmp/paused', 'frozen');
    await (typeof p.pause === 'function' ? p.pause() : p.betaPause());
    const snap = await Sandbox.createSnapshot(p.sandboxId);
    snaps.add(snap.snapshotId);
    eq((await Sandbox.getInfo(p.sandboxId)).state, 'paused', 'still paused after the snapshot');
    const c = await create(snap.snapshotId);
    eq(await read(c, '/tmp/paused'), 'frozen', 'the file, in a sandbox made from the snapshot');
    eq(await Sandbox.deleteSnapshot(snap.snapshotId), true, 'deleteSnapshot');
    snaps.delete(snap.snapshotId);
    await kill(c);
    await kill(p);
  });

  await check('fork (count 3): same files, independent children, the parent runs on', async () => {
    if (!hasFork) throw new Skip(`not applicable: SDK ${VERSION} lacks Sandbox.fork`);
    const p = await create(undefined, { metadata: { role: 'parent', run: RUN }, envs: { FORK_ENV: 'inherited' } });
    await p.files.write('/tmp/shared', 'from-parent');
    const kids = await p.fork({ count: 3, timeoutMs: 120_000 });
    eq(kids.length, 3, 'fork() answers one entry per child');
    for (const k of kids) {
      ok(k instanceof Sandbox, `a child is a Sandbox: ${k && k.message}`);
      created.add(k.sandboxId);
    }
    eq(new Set([p.sandboxId, ...kids.map((k) => k.sandboxId)]).size, 4, 'four distinct ids');
    for (const [i, k] of kids.entries()) {
      eq(await read(k, '/tmp/shared'), 'from-parent', `child ${i} has the parent's file`);
      eq((await k.commands.run('echo "$FORK_ENV"')).stdout, 'inherited\n', `child ${i} has the parent's envs`);
      await k.files.write('/tmp/mine', `child-${i}`);
    }
    for (const [i, k] of kids.entries()) eq(await read(k, '/tmp/mine'), `child-${i}`, `child ${i} sees only its own write`);
    eq(await read(p, '/tmp/mine'), 'missing\n', "the parent does not see the children's writes");
    await p.files.write('/tmp/later', 'parent-later');
    eq(await read(kids[0], '/tmp/later'), 'missing\n', "a child does not see the parent's later writes");
    const info = await kids[0].getInfo();
    eq(info.metadata.role, 'parent', "a child's metadata (the parent's)");
    // endAt - startedAt, not endAt - now: the checks above take a while on a loaded machine
    const ttl = info.endAt.getTime() - info.startedAt.getTime();
    ok(Math.abs(ttl - 120_000) <= 2_000, `the child has the timeout asked for (endAt - startedAt = ${ttl} ms)`);
    eq(await p.isRunning(), true, 'the parent runs on');
    eq((await p.commands.run('echo ok')).stdout, 'ok\n', 'the parent runs commands');
    await Promise.all(kids.map(kill));
    await kill(p);
  });

  await check('fork: bad count (400), unknown sandbox (SandboxNotFoundError)', async () => {
    if (!hasFork) throw new Skip(`not applicable: SDK ${VERSION} lacks Sandbox.fork`);
    const p = await create();
    const r = await api('POST', `/sandboxes/${p.sandboxId}/fork`, JSON.stringify({ count: 65 }));
    eq(r.status, 400, 'count 65');
    ok(/count/.test(r.json?.message || ''), `the 400 names count: ${r.text}`);
    eq((await api('POST', `/sandboxes/${p.sandboxId}/fork`, JSON.stringify({ count: 0 }))).status, 400, 'count 0');
    const err = await rejects(Sandbox.fork('nosuchsandbox0000', { count: 1 }), 'fork of an unknown sandbox');
    ok(err instanceof e2b.SandboxNotFoundError || err instanceof e2b.NotFoundError, `a not-found error: ${err}`);
    await kill(p);
  });

  await check("autoResume: a request resumes the sandbox the timeout paused", async () => {
    if (!hasLifecycle) throw new Skip(`not applicable: SDK ${VERSION} lacks lifecycle.autoResume`);
    const p = await create(undefined, { timeoutMs: 2_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
    eq((await p.getInfo()).lifecycle?.autoResume, true, 'getInfo().lifecycle.autoResume');
    await p.files.write('/tmp/kept', 'kept');
    await waitFor(async () => (await Sandbox.getInfo(p.sandboxId)).state === 'paused', 60_000, 'paused by the timeout');
    const r = await p.commands.run('cat /tmp/kept');
    eq(r.stdout, 'kept', 'commands.run on the paused sandbox (resumed)');
    eq(await p.isRunning(), true, 'isRunning() after');
    eq((await Sandbox.getInfo(p.sandboxId)).state, 'running', 'state after');
    // a pause by the client: the next call resumes it too
    await (typeof p.pause === 'function' ? p.pause() : p.betaPause());
    eq(await p.files.read('/tmp/kept'), 'kept', 'files.read after pause() (resumed)');
    await kill(p);
  });

  await check('without autoResume a paused sandbox stays unreachable', async () => {
    if (!hasLifecycle) throw new Skip(`not applicable: SDK ${VERSION} lacks lifecycle.onTimeout`);
    const p = await create(undefined, { timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } });
    eq((await p.getInfo()).lifecycle?.autoResume, false, 'getInfo().lifecycle.autoResume');
    await waitFor(async () => (await Sandbox.getInfo(p.sandboxId)).state === 'paused', 60_000, 'paused by the timeout');
    await rejects(p.commands.run('true', { requestTimeoutMs: 10_000 }), 'commands.run on the paused sandbox');
    eq(await p.isRunning(), false, 'isRunning()');
    eq((await Sandbox.getInfo(p.sandboxId)).state, 'paused', 'still paused');
    const bad = await api('POST', '/v2/sandboxes', JSON.stringify({ templateID: 'base', autoResume: { enabled: true } }));
    eq(bad.status, 400, 'autoResume without autoPause');
    await kill(p);
  });
}

try {
  await main();
} catch (err) {
  failed++;
  console.log(`FAIL ${TAG} (harness): ${err && err.stack ? err.stack : err}`);
} finally {
  for (const id of snaps) await Sandbox.deleteSnapshot(id).catch(() => {});
  for (const id of created) await Sandbox.kill(id).catch(() => {});
}
console.log(`${TAG}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
