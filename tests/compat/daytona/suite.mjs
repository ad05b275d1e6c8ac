// Daytona compatibility suite: drives the official `@daytonaio/sdk` (pinned,
// from npm, unmodified) against `sbx serve`'s Daytona API: the per-episode
// cycle (create -> exec -> upload -> download -> refresh activity -> labels ->
// list by labels -> delete), sessions, the `fs` routes, the error types, and
// snapshots built from a Dockerfile whose COPY context the SDK uploads
// through object storage (push-access + S3 with SigV4).
//
//   node suite.mjs SDK_PREFIX [FAILS]   (SDK_PREFIX/node_modules/@daytonaio/sdk)
//
// FAILS: the server was started with SBX_SERVE_DAYTONA_FAIL_CREATES=FAILS,
// so the first FAILS creates must fail with Daytona's quota error.
// Environment: DAYTONA_API_URL (http://127.0.0.1:PORT/api), DAYTONA_API_KEY
// (the server's key), DAYTONA_USE_DEPRECATED_POLLING=true (no socket.io).
// Run it from a directory without .env (the SDK refuses an endpoint named
// twice). SBX_DAYTONA_IMAGE names the image (default "bash").
//
// Every check prints PASS / FAIL / SKIP; the suite stops at the first
// failure, deletes every sandbox it created and ends with
//   daytona@VER: N passed, N failed, N skipped
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const prefix = process.argv[2];
if (!prefix) {
  console.error('usage: node suite.mjs SDK_PREFIX');
  process.exit(2);
}
for (const k of ['DAYTONA_API_URL', 'DAYTONA_API_KEY']) {
  if (!process.env[k]) {
    console.error(`suite: set ${k}`);
    process.exit(2);
  }
}
const req = createRequire(join(prefix, 'package.json'));
const VERSION = req('@daytonaio/sdk/package.json').version;
const sdk = req('@daytonaio/sdk');
const { Daytona, Image, DaytonaNotFoundError, DaytonaAuthenticationError, DaytonaError } = sdk;
const TAG = `daytona@${VERSION}`;
const IMAGE = process.env.SBX_DAYTONA_IMAGE || 'bash';
const RUN = `${process.pid}-${Date.now().toString(36)}`;
const CHECK_TIMEOUT_MS = 180_000;

let passed = 0, failed = 0, skipped = 0;
const created = [];
const daytona = new Daytona();

class Skip extends Error {}
function eq(got, want, what) {
  if (JSON.stringify(got) !== JSON.stringify(want))
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
function ok(cond, what) {
  if (!cond) throw new Error(what);
}
async function rejects(p, cls, what) {
  try {
    await p;
  } catch (err) {
    if (cls && !(err instanceof cls))
      throw new Error(`${what}: threw ${err?.constructor?.name} (${err?.message}), want ${cls.name}`);
    return err;
  }
  throw new Error(`${what}: did not throw`);
}
async function check(name, fn) {
  if (failed) return;
  const t = setTimeout(() => {}, 0);
  try {
    await Promise.race([
      fn(),
      new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS).unref()),
    ]);
    passed++;
    console.log(`PASS ${name}`);
  } catch (err) {
    if (err instanceof Skip) {
      skipped++;
      console.log(`SKIP ${name}: ${err.message}`);
    } else {
      failed++;
      console.log(`FAIL ${name}: ${err?.stack || err}`);
    }
  } finally {
    clearTimeout(t);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha = (b) => createHash('sha256').update(b).digest('hex');

const FAILS = Number(process.argv[3] || 0);
if (FAILS > 0)
  await check(`the first ${FAILS} creates get the quota error (400, "limit exceeded"), then capacity returns`, async () => {
    for (let i = 0; i < FAILS; i++) {
      const err = await rejects(daytona.create({ image: IMAGE }, { timeout: 30 }), DaytonaError, `create ${i + 1}`);
      eq(err.statusCode, 400, 'status');
      ok(/limit exceeded/i.test(err.message), `message names the limit: ${err.message}`);
    }
  });

let sb;
await check('create from image (FROM NAME) with labels and intervals', async () => {
  sb = await daytona.create(
    { image: IMAGE, labels: { 'sbx-run': RUN, role: 'main' }, autoStopInterval: 30, autoDeleteInterval: 0,
      envVars: { SBX_GREETING: 'hi' } },
    { timeout: 120 });
  created.push(sb);
  eq(sb.state, 'started', 'state');
  ok(sb.id && sb.toolboxProxyUrl, 'id and toolboxProxyUrl are set');
  eq(sb.labels['sbx-run'], RUN, 'label');
  eq(sb.labels['code-toolbox-language'], 'python', 'the SDK adds its language label');
  eq(sb.autoStopInterval, 30, 'autoStopInterval');
  eq(sb.autoDeleteInterval, 0, 'autoDeleteInterval');
  ok(sb.cpu > 0 && sb.memory > 0 && sb.disk > 0, 'resources are reported');
});

await check('process.executeCommand: merged output, exit code, env of the sandbox', async () => {
  const r = await sb.process.executeCommand('echo out; echo err >&2; echo $SBX_GREETING', undefined, undefined, 30);
  eq(r.exitCode, 0, 'exitCode');
  eq(r.result, 'out\nerr\nhi\n', 'result');
  const r3 = await sb.process.executeCommand('exit 3', undefined, undefined, 30);
  eq(r3.exitCode, 3, 'exit 3');
});

await check('process.executeCommand: cwd and envs', async () => {
  const r = await sb.process.executeCommand('pwd; echo "$FOO"', '/tmp', { FOO: 'a b' }, 30);
  eq(r.result, '/tmp\na b\n', 'result');
});

await check('process.executeCommand: timeout is a DaytonaTimeoutError-family error', async () => {
  const err = await rejects(sb.process.executeCommand('sleep 30', undefined, undefined, 1), DaytonaError, 'timeout');
  eq(err.statusCode, 408, 'status');
  const r = await sb.process.executeCommand('echo alive', undefined, undefined, 10);
  eq(r.result, 'alive\n', 'sandbox still answers');
});

await check('fs.uploadFile + downloadFile (1 MiB binary, nested path)', async () => {
  const data = randomBytes(1 << 20);
  await sb.fs.uploadFile(data, '/tmp/up/deep/blob.bin');
  const back = await sb.fs.downloadFile('/tmp/up/deep/blob.bin');
  eq(sha(back), sha(data), 'sha256 of the round trip');
  const r = await sb.process.executeCommand('wc -c < /tmp/up/deep/blob.bin', undefined, undefined, 10);
  eq(r.result.trim(), String(1 << 20), 'size inside');
});

await check('fs.uploadFiles (several, relative path) + downloadFiles', async () => {
  await sb.fs.uploadFiles([
    { source: Buffer.from('one\n'), destination: '/tmp/multi/1.txt' },
    { source: Buffer.from('two\n'), destination: 'rel-2.txt' },
  ]);
  const res = await sb.fs.downloadFiles([{ source: '/tmp/multi/1.txt' }, { source: 'rel-2.txt' }, { source: '/nope/x' }]);
  eq(res[0].result?.toString(), 'one\n', 'first');
  eq(res[1].result?.toString(), 'two\n', 'second (relative to the working dir)');
  ok(res[2].error, 'a missing file is a per-file error');
});

await check('fs.downloadFile of a missing file throws', async () => {
  await rejects(sb.fs.downloadFile('/does/not/exist'), DaytonaError, 'missing file');
});

await check('fs: createFolder, listFiles, getFileDetails, moveFiles, setFilePermissions, deleteFile', async () => {
  await sb.fs.createFolder('/tmp/d1', '755');
  await sb.fs.uploadFile(Buffer.from('x'), '/tmp/d1/f.txt');
  const list = await sb.fs.listFiles('/tmp/d1');
  eq(list.map((f) => f.name), ['f.txt'], 'listing');
  eq(list[0].isDir, false, 'isDir');
  const info = await sb.fs.getFileDetails('/tmp/d1');
  eq(info.isDir, true, 'folder isDir');
  await sb.fs.moveFiles('/tmp/d1/f.txt', '/tmp/d1/g.txt');
  await sb.fs.setFilePermissions('/tmp/d1/g.txt', { mode: '600' });
  const gi = await sb.fs.getFileDetails('/tmp/d1/g.txt');
  eq(gi.permissions, '0600', 'permissions');
  eq(gi.size, 1, 'size');
  await sb.fs.deleteFile('/tmp/d1/g.txt');
  await rejects(sb.fs.getFileDetails('/tmp/d1/g.txt'), DaytonaError, 'deleted file');
  await sb.fs.deleteFile('/tmp/d1', true);
  await rejects(sb.fs.getFileDetails('/tmp/d1'), DaytonaNotFoundError, 'deleted folder');
});

await check('fs: findFiles, searchFiles, replaceInFiles', async () => {
  await sb.fs.uploadFiles([
    { source: Buffer.from('alpha\nTODO: one\nbeta\n'), destination: '/tmp/srch/a.txt' },
    { source: Buffer.from('TODO: two\n'), destination: '/tmp/srch/sub/b.md' },
  ]);
  const m = await sb.fs.findFiles('/tmp/srch', 'TODO:');
  eq(m.map((x) => [x.file, x.line, x.content]).sort(),
    [['/tmp/srch/a.txt', 2, 'TODO: one'], ['/tmp/srch/sub/b.md', 1, 'TODO: two']], 'matches');
  eq(await sb.fs.findFiles('/tmp/srch', 'nothing-here'), [], 'no match');
  const f = await sb.fs.searchFiles('/tmp/srch', '*.md');
  eq(f.files, ['/tmp/srch/sub/b.md'], 'search by glob');
  const rr = await sb.fs.replaceInFiles(['/tmp/srch/a.txt', '/tmp/srch/none.txt'], 'TODO', 'DONE');
  eq(rr.map((x) => [x.file, x.success]), [['/tmp/srch/a.txt', true], ['/tmp/srch/none.txt', false]], 'replace results');
  eq((await sb.fs.downloadFile('/tmp/srch/a.txt')).toString(), 'alpha\nDONE: one\nbeta\n', 'replaced');
  await sb.fs.setFilePermissions('/tmp/srch/sub/b.md', { mode: '640' });
  await sb.fs.replaceInFiles(['/tmp/srch/sub/b.md'], 'two', '2');
  eq((await sb.fs.getFileDetails('/tmp/srch/sub/b.md')).permissions, '0640', 'a rewritten file keeps its mode');
  await rejects(sb.fs.findFiles('/no/such/dir', 'x'), DaytonaNotFoundError, 'find in a missing dir');
});

await check('sessions: state carries over, streams stay apart', async () => {
  await sb.process.createSession('s1');
  await sb.process.executeSessionCommand('s1', { command: 'cd /tmp && export SBX_A=1' });
  const r = await sb.process.executeSessionCommand('s1', { command: 'pwd; echo $SBX_A; echo e >&2; exit_code=5; (exit 5)' });
  eq(r.stdout, '/tmp\n1\n', 'stdout');
  eq(r.stderr, 'e\n', 'stderr');
  eq(r.exitCode, 5, 'exitCode');
  const s = await sb.process.getSession('s1');
  eq(s.commands.length, 2, 'commands recorded');
});

await check('sessions: async exec, input, poll, logs', async () => {
  const a = await sb.process.executeSessionCommand('s1', { command: 'read x; echo "got $x"; echo bye >&2', runAsync: true });
  ok(a.cmdId, 'cmdId');
  await sb.process.sendSessionCommandInput('s1', a.cmdId, 'hello\n');
  let c;
  for (let i = 0; i < 200; i++) {
    c = await sb.process.getSessionCommand('s1', a.cmdId);
    if (c.exitCode !== undefined && c.exitCode !== null) break;
    await sleep(50);
  }
  eq(c.exitCode, 0, 'exitCode');
  const logs = await sb.process.getSessionCommandLogs('s1', a.cmdId);
  eq(logs.stdout, 'got hello\n', 'stdout');
  eq(logs.stderr, 'bye\n', 'stderr');
  const all = await sb.process.listSessions();
  ok(all.some((x) => x.sessionId === 's1'), 'listed');
  await sb.process.deleteSession('s1');
  await rejects(sb.process.getSession('s1'), DaytonaNotFoundError, 'deleted session');
  const left = await sb.process.executeCommand('ls -A /tmp/.sbx-daytona', undefined, undefined, 10);
  eq(left.result, '', 'a deleted session leaves no logs behind');
});

await check('sessions: a command that exits the shell ends the session with an error, not a hang', async () => {
  await sb.process.createSession('ends');
  await rejects(sb.process.executeSessionCommand('ends', { command: 'exit 7' }), DaytonaError, 'exit in a session');
  await rejects(sb.process.executeSessionCommand('ends', { command: 'echo again' }), DaytonaError, 'a session whose shell ended');
  await sb.process.deleteSession('ends');
  await rejects(sb.process.createSession('bad/id'), DaytonaError, 'a session id with a slash');
});

await check('no fd leak: 30 rounds of session exec, execute, upload, download', async () => {
  const pid = process.env.SBX_DAYTONA_SERVER_PID;
  if (!pid) throw new Skip('SBX_DAYTONA_SERVER_PID not set (run.sh sets it)');
  const { readdirSync } = await import('node:fs');
  const fds = () => readdirSync(`/proc/${pid}/fd`).length;
  const round = async (i) => {
    await sb.process.createSession(`leak-${i}`);
    const r = await sb.process.executeSessionCommand(`leak-${i}`, { command: `echo ${i}` });
    eq(r.stdout, `${i}\n`, 'session exec');
    await sb.process.deleteSession(`leak-${i}`);
    eq((await sb.process.executeCommand(`echo ${i}`, undefined, undefined, 10)).result, `${i}\n`, 'execute');
    await sb.fs.uploadFile(Buffer.from(`x${i}`), '/tmp/leak.txt');
    eq((await sb.fs.downloadFile('/tmp/leak.txt')).toString(), `x${i}`, 'round trip');
  };
  await round(0); // warm up whatever is opened once per sandbox
  await sleep(200);
  const before = fds();
  for (let i = 1; i <= 30; i++) await round(i);
  await sleep(200);
  const after = fds();
  ok(after <= before + 2, `server fds: ${before} before, ${after} after 30 rounds`);
});

await check('refreshActivity, setAutostopInterval, setAutoDeleteInterval', async () => {
  await sb.refreshActivity();
  await sb.setAutostopInterval(45);
  await sb.setAutoDeleteInterval(5);
  await sb.refreshData();
  eq(sb.autoStopInterval, 45, 'autoStopInterval');
  eq(sb.autoDeleteInterval, 5, 'autoDeleteInterval');
});

let second;
await check('setLabels replaces; list by labels (cursor pages)', async () => {
  second = await daytona.create({ snapshot: IMAGE, user: 'user', labels: { 'sbx-run': RUN, role: 'other' } }, { timeout: 120 });
  eq(second.user, 'user', 'user');
  created.push(second);
  const l = await sb.setLabels({ 'sbx-run': RUN, role: 'relabelled' });
  eq(l, { 'sbx-run': RUN, role: 'relabelled' }, 'labels returned');
  const seen = [];
  for await (const x of await daytona.list({ labels: { 'sbx-run': RUN }, limit: 1 })) seen.push(x.id);
  eq(seen.sort(), [sb.id, second.id].sort(), 'both, one page at a time');
  const only = [];
  for await (const x of await daytona.list({ labels: { 'sbx-run': RUN, role: 'relabelled' } })) only.push(x.id);
  eq(only, [sb.id], 'filtered by two labels');
  const got = await daytona.get(sb.id);
  eq(got.labels, { 'sbx-run': RUN, role: 'relabelled' }, 'get shows the new labels');
});

await check('stop and start', async () => {
  await second.stop();
  eq(second.state, 'stopped', 'stopped');
  const stopped = [];
  for await (const x of await daytona.list({ labels: { 'sbx-run': RUN }, states: ['stopped'] })) stopped.push(x.id);
  eq(stopped, [second.id], 'list by state');
  await second.start();
  eq(second.state, 'started', 'started');
  const r = await second.process.executeCommand('echo back; id -un; pwd', undefined, undefined, 10);
  eq(r.result, 'back\nuser\n/home/user\n', 'runs after start, as the sandbox user in its home');
  // a session left open, with a command still running, goes with its sandbox
  await second.process.createSession('left-open');
  await second.process.executeSessionCommand('left-open', { command: 'sleep 600', runAsync: true });
});

await check('errors: unknown sandbox -> DaytonaNotFoundError; bad key -> DaytonaAuthenticationError', async () => {
  await rejects(daytona.get('no-such-sandbox'), DaytonaNotFoundError, 'get unknown');
  const bad = new Daytona({ apiKey: 'wrong', apiUrl: process.env.DAYTONA_API_URL });
  await rejects(bad.get(sb.id), DaytonaAuthenticationError, 'bad key');
  await rejects(daytona.create({ image: 'no-such-image:1' }, { timeout: 30 }), DaytonaError, 'unknown image');
});

await check('wire: error shapes and bad input (raw HTTP)', async () => {
  const base = process.env.DAYTONA_API_URL.replace(/\/+$/, '');
  const tb = `${sb.toolboxProxyUrl.replace(/\/+$/, '')}/${sb.id}`;
  const auth = { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` };
  const shape = async (res, status, what) => {
    eq(res.status, status, `${what}: status`);
    const j = await res.json();
    eq(j.statusCode, status, `${what}: statusCode`);
    ok(typeof j.message === 'string' && j.message.length > 0, `${what}: message`);
    ok(typeof j.error === 'string' && j.timestamp && j.path, `${what}: error, timestamp, path`);
    return j;
  };
  await shape(await fetch(`${base}/sandbox`), 401, 'no key');
  await shape(await fetch(`${base}/sandbox`, { headers: { Authorization: 'Bearer nope' } }), 401, 'wrong key');
  await shape(await fetch(`${base}/sandbox`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{not json' }), 400, 'bad JSON');
  const j = await shape(await fetch(`${base}/sandbox`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"labels":{"a":1}}' }), 400, 'labels not strings');
  ok(/labels/.test(j.message), `the message names the field: ${j.message}`);
  await shape(await fetch(`${base}/sandbox`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"labels":{"a=b":"c"}}' }), 400, "a label key with '='");
  await shape(await fetch(`${base}/sandbox/${sb.id}/labels`, { method: 'PUT', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"labels":{"k":"line\\nbreak"}}' }), 400, 'a label value with a newline');
  await shape(await fetch(`${base}/sandbox?labels=%5B1%5D`, { headers: auth }), 400, 'labels filter not an object');
  await shape(await fetch(`${base}/sandbox?limit=0`, { headers: auth }), 400, 'limit 0');
  await shape(await fetch(`${base}/sandbox/${sb.id}/autostop/x`, { method: 'POST', headers: auth }), 400, 'interval not a number');
  await shape(await fetch(`${base}/sandbox/${sb.id}/archive`, { method: 'POST', headers: auth }), 404, 'unimplemented route');
  const nf = await shape(await fetch(`${tb}/files/info?path=/nope`, { headers: auth }), 404, 'toolbox missing file');
  eq([nf.code, nf.source], ['FILE_NOT_FOUND', 'DAYTONA_DAEMON'], 'daemon error code');
  await shape(await fetch(`${tb}/process/execute`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"command":5}' }), 400, 'command not a string');
  const form = new FormData();
  form.append('files[0].file', new Blob(['x']), 'x.txt');
  await shape(await fetch(`${tb}/files/bulk-upload`, { method: 'POST', headers: auth, body: form }), 400, 'file part without its path');
  await shape(await fetch(`${tb}/files/bulk-upload`, { method: 'POST', headers: { ...auth, 'Content-Type': 'text/plain' }, body: 'x' }), 400, 'not multipart');
  await shape(await fetch(`${tb}/files/bulk-download`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"paths":[]}' }), 400, 'no paths');
  await shape(await fetch(`${base}/toolbox/nope/toolbox/process/execute`, { method: 'POST', headers: auth, body: '{}' }), 404, 'toolbox of an unknown sandbox');
  // no key: refused from the headers, in the same step as the E2B planes'
  // check (router.c), whose unread-body behaviour tests/security/server.c covers
  await shape(await fetch(`${tb}/files/bulk-upload`, { method: 'POST', headers: { 'Content-Type': 'multipart/form-data; boundary=x' } }), 401, 'upload without a key');
  // a FIFO planted in the sandbox never blocks the server
  const mk = await sb.process.executeCommand('mkfifo /tmp/fifo && echo ok', undefined, undefined, 10);
  eq(mk.result, 'ok\n', 'mkfifo');
  await shape(await fetch(`${tb}/files/download?path=/tmp/fifo`, { headers: auth }), 400, 'download of a FIFO');
  const dl = await sb.fs.downloadFiles([{ source: '/tmp/fifo' }]);
  ok(dl[0].error, 'bulk-download of a FIFO is a per-file error');
  await rejects(sb.fs.uploadFile(Buffer.from('x'), '/tmp/fifo'), DaytonaError, 'upload onto a FIFO');
  const r = await fetch(`${base}/toolbox/${sb.id}/toolbox/process/execute`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"command":"echo legacy","timeout":10}' });
  eq(await r.json(), { exitCode: 0, result: 'legacy\n' }, 'the deprecated /api/toolbox/{id}/toolbox prefix');
});

await check('create from a Dockerfile (template builder)', async () => {
  const img = Image.base(IMAGE).runCommands(`echo built-${RUN} > /built.txt`);
  const b = await daytona.create({ image: img, labels: { 'sbx-run': RUN } }, { timeout: 170 });
  created.push(b);
  const r = await b.process.executeCommand('cat /built.txt', undefined, undefined, 10);
  eq(r.result, `built-${RUN}\n`, 'the RUN step ran');
});

// Snapshots with a build context: the SDK hashes each COPY source, asks
// push-access for temporary S3 credentials, lists <org>/<hash>/ and puts
// <org>/<hash>/context.tar (SigV4), then POST /snapshots with buildInfo
// {dockerfileContent, contextHashes} and polls the snapshot by name.
const SNAP = `sbx-compat-${RUN}`;
const big = randomBytes(6 << 20);
let snap;
await check('snapshot.create from Image.fromDockerfile: COPY sources uploaded through object storage (one in parts)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-dt-snap-'));
  const states = [];
  try {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'hello.txt'), `hello ${RUN}\n`);
    writeFileSync(join(dir, 'sub', 'nested.txt'), 'nested\n');
    // over the uploader's 5 MiB part size: a multipart upload
    writeFileSync(join(dir, 'big.bin'), big);
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${IMAGE}\nCOPY hello.txt /opt/hello.txt\nCOPY sub /opt/sub\nCOPY big.bin /opt/big.bin\nRUN cat /opt/hello.txt > /opt/copied-at-build.txt\nRUN echo building ${RUN}; sleep 2\n`);
    snap = await daytona.snapshot.create({ name: SNAP, image: Image.fromDockerfile(join(dir, 'Dockerfile')) },
      { timeout: 170, onLogs: (l) => states.push(l) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  eq(snap.state, 'active', 'state');
  eq(snap.name, SNAP, 'name');
  // onLogs follows the build logs (build-logs-url) once the state leaves pending
  ok(states.includes(`Created snapshot ${SNAP} (active)`), `onLogs lines: ${JSON.stringify(states)}`);
  eq(snap.buildInfo.contextHashes.length, 3, 'one context per COPY source');
  ok(/COPY hello.txt/.test(snap.buildInfo.dockerfileContent), 'dockerfileContent kept');
});

await check('snapshot.get by name and id, snapshot.list pages', async () => {
  const byName = await daytona.snapshot.get(SNAP);
  eq(byName.id, snap.id, 'id');
  const byId = await daytona.snapshot.get(snap.id);
  eq(byId.name, SNAP, 'name by id');
  const page = await daytona.snapshot.list(1, 200);
  ok(page.items.some((x) => x.name === SNAP), 'listed');
  ok(page.total >= 1 && page.page === 1 && page.totalPages >= 1, `page fields: ${JSON.stringify({ ...page, items: page.items.length })}`);
  await rejects(daytona.snapshot.get('sbx-no-such-snapshot'), DaytonaNotFoundError, 'unknown snapshot');
  await rejects(daytona.snapshot.create({ name: SNAP, image: IMAGE }), DaytonaError, 'a second snapshot of that name');
});

await check('create({snapshot}) starts from it: the COPYed files are there', async () => {
  const b = await daytona.create({ snapshot: SNAP, labels: { 'sbx-run': RUN } }, { timeout: 120 });
  created.push(b);
  const r = await b.process.executeCommand('cat /opt/hello.txt /opt/sub/nested.txt /opt/copied-at-build.txt', undefined, undefined, 10);
  eq(r.result, `hello ${RUN}\nnested\nhello ${RUN}\n`, 'files from the context');
  const h = await b.process.executeCommand('sha256sum /opt/big.bin', undefined, undefined, 30);
  eq(h.result.split(' ')[0], sha(big), 'the 6 MiB file that went up in parts');
});

await check('snapshot.create from imageName, and a failed build reports build_failed with its reason', async () => {
  const s2 = await daytona.snapshot.create({ name: `${SNAP}-img`, image: IMAGE }, { timeout: 60 });
  eq(s2.state, 'active', 'imageName snapshot');
  await daytona.snapshot.delete(s2);
  const err = await rejects(daytona.snapshot.create({ name: `${SNAP}-bad`, image: Image.base(IMAGE).runCommands('exit 7') }, { timeout: 120 }),
    DaytonaError, 'failing build');
  ok(/Failed to create snapshot/.test(err.message) && /Reason: ./.test(err.message), `reason given: ${err.message}`);
  const bad = await daytona.snapshot.get(`${SNAP}-bad`);
  eq(bad.state, 'build_failed', 'state');
  ok(bad.errorReason, 'errorReason');
  await rejects(daytona.create({ snapshot: `${SNAP}-bad` }, { timeout: 30 }), DaytonaError, 'create from a failed snapshot');
  await daytona.snapshot.delete(bad);
});

await check('object storage (raw): push-access, SigV4 is required and checked', async () => {
  const base = process.env.DAYTONA_API_URL.replace(/\/+$/, '');
  const auth = { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` };
  const pa = await (await fetch(`${base}/object-storage/push-access`, { headers: auth })).json();
  for (const k of ['accessKey', 'secret', 'sessionToken', 'storageUrl', 'organizationId', 'bucket', 'region'])
    ok(typeof pa[k] === 'string' && pa[k].length > 0, `push-access ${k}`);
  eq((await fetch(`${base}/object-storage/push-access`)).status, 401, 'push-access without a key');
  const obj = `${pa.storageUrl}/${pa.bucket}/${pa.organizationId}/0123456789abcdef0123456789abcdef/context.tar`;
  const none = await fetch(obj, { method: 'PUT', body: 'x' });
  eq(none.status, 403, 'PUT without a signature');
  ok(/<Code>AccessDenied<\/Code>/.test(await none.text()), 'S3 error XML');
  const forged = await fetch(obj, { method: 'PUT', body: 'x', headers: {
    Authorization: `AWS4-HMAC-SHA256 Credential=${pa.accessKey}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=${'0'.repeat(64)}`,
    'x-amz-date': new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, ''), 'x-amz-security-token': pa.sessionToken } });
  eq(forged.status, 403, 'PUT with a wrong signature');
});

await check('create({image: Image.base(..).addLocalFile(..)}): a sandbox built with an uploaded context', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-dt-ctx-'));
  let b;
  try {
    writeFileSync(join(dir, 'note.txt'), `note ${RUN}\n`);
    const img = Image.base(IMAGE).addLocalFile(join(dir, 'note.txt'), '/opt/note.txt');
    b = await daytona.create({ image: img, labels: { 'sbx-run': RUN } }, { timeout: 170 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  created.push(b);
  const r = await b.process.executeCommand('cat /opt/note.txt', undefined, undefined, 10);
  eq(r.result, `note ${RUN}\n`, 'the local file is in the sandbox');
});

await check('snapshot.delete', async () => {
  await daytona.snapshot.delete(snap);
  await rejects(daytona.snapshot.get(SNAP), DaytonaNotFoundError, 'gone');
});

await check('delete', async () => {
  for (const x of created.splice(0)) await x.delete();
  await rejects(daytona.get(sb.id), DaytonaNotFoundError, 'gone');
  const left = [];
  for await (const x of await daytona.list({ labels: { 'sbx-run': RUN } })) left.push(x.id);
  eq(left, [], 'none left with this run label');
});

for (const x of created) {
  try { await x.delete(); } catch { /* best effort */ }
}
console.log(`${TAG}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
