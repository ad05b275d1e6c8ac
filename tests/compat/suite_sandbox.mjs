// The sandbox checks of the E2B SDK compatibility suite (suite.mjs): info,
// timeouts, list filters and order, connect, pause, lifecycle, metrics,
// egress lists, bad requests, kill.
import {
  VERSION,
  e2b,
  Sandbox,
  CommandExitError,
  NotFoundError,
  AuthenticationError,
  TAG,
  sdkHas,
  RUN,
  skip,
  eq,
  ok,
  rejects,
  withTimeout,
  sleep,
  waitFor,
  check,
  api,
  chunked,
  listIds,
  expectError,
  created,
  create,
  listSdk,
  D,
} from './suite_lib.mjs';

let second; // a second sandbox, for list filters and kill

export async function sandboxChecks(sbx) {
  await check('getInfo', async () => {
    const info = await sbx.getInfo();
    eq(info.sandboxId, sbx.sandboxId, 'sandboxId');
    eq(typeof info.templateId, 'string', 'templateId is a string');
    eq(info.metadata?.compat_run, RUN, 'metadata.compat_run');
    eq(info.metadata?.role, 'main', 'metadata.role');
    ok(info.startedAt instanceof Date && !isNaN(info.startedAt), 'startedAt is a valid Date', info.startedAt);
    ok(info.endAt instanceof Date && info.endAt > info.startedAt, 'endAt is a Date after startedAt', info.endAt);
    if ('state' in info) eq(info.state, 'running', 'state');
    const s = await Sandbox.getInfo(sbx.sandboxId);
    eq(s.sandboxId, sbx.sandboxId, 'static getInfo sandboxId');
    await rejects(Sandbox.getInfo('nosuchsandbox0000000'), NotFoundError, 'static getInfo of an unknown id');
  });

  await check('setTimeout', async () => {
    const t0 = Date.now();
    await sbx.setTimeout(600_000);
    const a = (await sbx.getInfo()).endAt.getTime();
    ok(Math.abs(a - (t0 + 600_000)) < 60_000, 'endAt about now + 600 s after setTimeout(600000)', new Date(a).toISOString());
    await Sandbox.setTimeout(sbx.sandboxId, 900_000);
    const b = (await sbx.getInfo()).endAt.getTime();
    ok(b - a > 240_000 && b - a < 360_000, 'static setTimeout(900000) moves endAt by about 300 s', (b - a) / 1000);
    await rejects(Sandbox.setTimeout('nosuchsandbox0000000', 60_000), NotFoundError, 'setTimeout of an unknown id');
  });

  await check('list with a metadata filter', async () => {
    second = await create({ metadata: { role: 'second' } });
    const all = await listSdk({ metadata: { compat_run: RUN } });
    eq(all.map((s) => s.sandboxId).sort().join(','), [sbx.sandboxId, second.sandboxId].sort().join(','), 'ids matching compat_run');
    const one = await listSdk({ metadata: { compat_run: RUN, role: 'second' } });
    eq(one.map((s) => s.sandboxId).join(','), second.sandboxId, 'ids matching compat_run and role=second');
    eq(one[0].metadata?.role, 'second', 'listed metadata.role');
    if ('state' in one[0]) eq(one[0].state, 'running', 'listed state');
    const none = await listSdk({ metadata: { compat_run: RUN, role: 'nobody' } });
    eq(none.length, 0, 'no sandbox matches role=nobody');
  });

  await check('connect', async () => {
    const c = await Sandbox.connect(sbx.sandboxId);
    eq(c.sandboxId, sbx.sandboxId, 'connected sandboxId');
    const r = await c.commands.run(`cat ${D}/empty; echo connected`);
    eq(r.stdout, 'connected\n', 'command through the connected handle');
    await c.files.write(`${D}/via-connect.txt`, 'via connect');
    eq(await sbx.files.read(`${D}/via-connect.txt`), 'via connect', 'file written through connect, read through create');
    await rejects(Sandbox.connect('nosuchsandbox0000000'), NotFoundError, 'connect to an unknown id');
  });

  await check('list: newest first, startedAfter / startedBefore', async () => {
    const q = `metadata=${encodeURIComponent(`compat_run=${RUN}`)}`;
    const r = await api('GET', `/v2/sandboxes?${q}`);
    eq(r.status, 200, 'GET /v2/sandboxes status');
    const ids = r.json.map((x) => x.sandboxID);
    eq(ids.join(','), [second.sandboxId, sbx.sandboxId].join(','), 'default order: newest first');
    const asc = await api('GET', `/v2/sandboxes?${q}&order=asc`);
    eq(asc.json.map((x) => x.sandboxID).join(','), [sbx.sandboxId, second.sandboxId].join(','), 'order=asc');
    const paged = await api('GET', `/v2/sandboxes?${q}&limit=1`);
    eq(paged.json.map((x) => x.sandboxID).join(','), second.sandboxId, 'first page of one');
    const tok = paged.headers.get('x-next-token');
    ok(tok, 'X-Next-Token on the first page');
    const page2 = await api('GET', `/v2/sandboxes?${q}&limit=1&nextToken=${encodeURIComponent(tok)}`);
    eq(page2.json.map((x) => x.sandboxID).join(','), sbx.sandboxId, 'second page');
    eq(page2.headers.get('x-next-token'), null, 'no X-Next-Token on the last page');
    const t2 = (await second.getInfo()).startedAt;
    const after = await api('GET', `/v2/sandboxes?${q}&startedAfter=${encodeURIComponent(new Date(t2.getTime() - 1).toISOString())}`);
    eq(after.json.map((x) => x.sandboxID).join(','), second.sandboxId, 'startedAfter just before the second one');
    const before = await api('GET', `/v2/sandboxes?${q}&startedBefore=${encodeURIComponent(new Date(t2.getTime() - 1).toISOString())}`);
    eq(before.json.map((x) => x.sandboxID).join(','), sbx.sandboxId, 'startedBefore just before the second one');
    expectError(await api('GET', '/v2/sandboxes?startedAfter=yesterday'), 400, 'startedAfter that is not RFC 3339');
    const sdk = await listSdk({ metadata: { compat_run: RUN } });
    eq(sdk[0]?.sandboxId, second.sandboxId, 'Sandbox.list(): newest first');
  });

  await check('pause: envd unreachable until connect resumes', async () => {
    const p = await create({ metadata: { role: 'pause' } });
    await p.commands.run('echo before > /tmp/state');
    await (typeof p.pause === 'function' ? p.pause() : p.betaPause());
    eq(await p.isRunning(), false, 'isRunning() of a paused sandbox');
    eq((await Sandbox.getInfo(p.sandboxId)).state, 'paused', 'state after pause');
    await rejects(p.commands.run('true', { requestTimeoutMs: 10_000 }), null, 'commands.run on a paused sandbox');
    await rejects(p.files.read('/tmp/state'), null, 'files.read on a paused sandbox');
    const c = await Sandbox.connect(p.sandboxId);
    eq(await c.isRunning(), true, 'isRunning() after connect');
    eq((await Sandbox.getInfo(p.sandboxId)).state, 'running', 'state after connect');
    eq((await c.commands.run('cat /tmp/state')).stdout, 'before\n', 'state kept across pause');
    eq(await p.isRunning(), true, 'the old handle works again');
    await Sandbox.kill(p.sandboxId);
    created.delete(p.sandboxId);
  });

  await check("lifecycle onTimeout 'pause': the timeout pauses", async () => {
    // 2.30 on: Sandbox.create's lifecycle.onTimeout; before: betaCreate's autoPause.
    const opts = { metadata: { compat_run: RUN, role: 'autopause' }, timeoutMs: 2_000 };
    let p;
    if (sdkHas('lifecycle')) p = await create({ ...opts, lifecycle: { onTimeout: 'pause' } });
    else if (typeof Sandbox.betaCreate === 'function') p = await Sandbox.betaCreate({ ...opts, autoPause: true });
    else skip(`${TAG} can ask for neither lifecycle.onTimeout nor autoPause`);
    created.add(p.sandboxId);
    const pi = await p.getInfo();
    if ('lifecycle' in pi) eq(pi.lifecycle?.onTimeout, 'pause', 'getInfo().lifecycle.onTimeout');
    await p.files.write('/tmp/kept', 'kept');
    await waitFor(async () => (await Sandbox.getInfo(p.sandboxId)).state === 'paused', 60_000, 'state paused after the timeout');
    eq(await p.isRunning(), false, 'isRunning() once paused');
    const c = await Sandbox.connect(p.sandboxId, { timeoutMs: 300_000 });
    eq(await c.files.read('/tmp/kept'), 'kept', 'files kept across the auto-pause');
    await Sandbox.kill(p.sandboxId);
    created.delete(p.sandboxId);
  });

  await check('kill during cmd.wait()', async () => {
    const k = await create({ metadata: { role: 'killwait' } });
    const h = await k.commands.run('sleep 600', { background: true });
    const waiting = h.wait().then((res) => ({ res }), (err) => ({ err }));
    await sleep(300);
    eq(await Sandbox.kill(k.sandboxId), true, 'Sandbox.kill');
    created.delete(k.sandboxId);
    const w = await withTimeout(waiting, 30_000, 'wait() of a command in a killed sandbox');
    // E2B: the stream breaks with no end event; the SDK raises TimeoutError
    // ("sandbox timeout"), not CommandExitError.
    ok(w.err, 'wait() rejects', w.res);
    ok(w.err instanceof e2b.TimeoutError, `wait() rejects with TimeoutError (got ${w.err?.constructor?.name}: ${w.err?.message})`);
  });

  await check('getMetrics (cgroups)', async () => {
    await sbx.commands.run('head -c 8000000 /dev/zero > /tmp/m.bin; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done');
    const m = await sbx.getMetrics();
    ok(Array.isArray(m) && m.length >= 1, 'at least one sample', m);
    const x = m[m.length - 1];
    ok(x.timestamp instanceof Date && !isNaN(x.timestamp), 'timestamp is a Date', x.timestamp);
    ok(Number.isInteger(x.cpuCount) && x.cpuCount >= 1, 'cpuCount', x.cpuCount);
    ok(typeof x.cpuUsedPct === 'number' && x.cpuUsedPct >= 0, 'cpuUsedPct', x.cpuUsedPct);
    ok(x.memUsed > 0 && x.memTotal >= x.memUsed, 'memUsed <= memTotal, both > 0', x);
    ok(x.diskTotal > 0 && x.diskUsed >= 0 && x.diskUsed <= x.diskTotal, 'diskUsed <= diskTotal', x);
    const s = await Sandbox.getMetrics(sbx.sandboxId);
    ok(s.length >= 1, 'static getMetrics', s);
    // 2.8.x maps this 404 to a plain SandboxError("404: ...").
    const nf = await rejects(Sandbox.getMetrics('nosuchsandbox0000000'), null, 'getMetrics of an unknown id');
    ok(nf instanceof NotFoundError || /^404: /.test(nf.message), 'getMetrics of an unknown id: not found', `${nf?.constructor?.name}: ${nf?.message}`);
  });

  await check('network egress lists (allowOut / denyOut, updateNetwork)', async () => {
    if (typeof Sandbox.updateNetwork !== 'function') skip(`SDK ${VERSION} has no network options`);
    // The compat server runs without --allow-internet: sandboxes have no
    // network, lists are kept and reported, and opening one is refused
    // (security/server_network proves the rules on an internet server).
    const n = await create({ network: { allowOut: ['192.0.2.7'], denyOut: ['0.0.0.0/0'] } });
    let info = await Sandbox.getInfo(n.sandboxId);
    const net = (i) => JSON.stringify({ a: i.network?.allowOut ?? null, d: i.network?.denyOut ?? null });
    eq(net(info), JSON.stringify({ a: ['192.0.2.7'], d: ['0.0.0.0/0'] }), 'getInfo network after create');
    await Sandbox.updateNetwork(n.sandboxId, { denyOut: ['0.0.0.0/0'] });
    info = await Sandbox.getInfo(n.sandboxId);
    eq(net(info), JSON.stringify({ a: null, d: ['0.0.0.0/0'] }), 'updateNetwork replaces (allowOut cleared)');
    const e = await rejects(Sandbox.updateNetwork(n.sandboxId, { allowOut: ['192.0.2.7'] }), null,
      'opening a sandbox created without internet access');
    ok(/no internet access/.test(e.message), 'the error says why', e.message);
    await rejects(Sandbox.create({ network: { denyOut: ['example.com'] } }), null, 'a domain in denyOut');
    await rejects(Sandbox.updateNetwork('nosuchsandbox0000000', {}), NotFoundError, 'updateNetwork of an unknown id');
    await Sandbox.kill(n.sandboxId);
    created.delete(n.sandboxId);
  });

  await check('setTimeout expiry kills the sandbox', async () => {
    const t = await create({ metadata: { role: 'expiry' } });
    await t.setTimeout(2_000);
    await waitFor(async () => {
      try {
        await Sandbox.getInfo(t.sandboxId);
        return false;
      } catch (err) {
        if (err instanceof NotFoundError) return true;
        throw err;
      }
    }, 60_000, 'getInfo reports NotFound after the timeout');
    eq(await Sandbox.kill(t.sandboxId), false, 'kill after expiry');
    created.delete(t.sandboxId);
  });

  await check('bad requests change nothing', async () => {
    const before = await listIds();
    ok(before.includes(sbx.sandboxId) && before.includes(second.sandboxId), 'both sandboxes listed', before);

    // Malformed JSON.
    for (const path of ['/v2/sandboxes', '/sandboxes']) {
      expectError(await api('POST', path, { body: '{"templateID":' }), 400, `POST ${path} malformed JSON`);
      expectError(await api('POST', path, { body: '[1,2' }), 400, `POST ${path} truncated array`);
    }
    // The same, chunked (no Content-Length), as SDKs from about 2.30 send bodies.
    expectError(await api('POST', '/v2/sandboxes', { body: chunked('{"templateID":'), duplex: 'half' }), 400, 'POST /v2/sandboxes malformed JSON, chunked');
    expectError(await api('POST', `/sandboxes/${sbx.sandboxId}/timeout`, { body: '{"timeout":' }), 400, 'POST timeout malformed JSON');
    // Well-formed JSON of the wrong shape.
    expectError(await api('POST', '/v2/sandboxes', { body: '[]' }), 400, 'POST /v2/sandboxes with an array body');
    expectError(await api('POST', '/v2/sandboxes', { body: '{"templateID":5}' }), 400, 'POST /v2/sandboxes with a numeric templateID');
    expectError(await api('POST', '/v2/sandboxes', { body: '{"templateID":"base","metadata":{"a":1}}' }), 400, 'POST /v2/sandboxes with a non-string metadata value');
    expectError(await api('POST', `/sandboxes/${sbx.sandboxId}/timeout`, { body: '{"timeout":"x"}' }), 400, 'POST timeout with a string timeout');
    expectError(await api('POST', '/v2/sandboxes', { body: '{"templateID":"sbx-compat-no-such-template"}' }), 404, 'POST /v2/sandboxes with an unknown template');
    // Unknown sandbox.
    const ghost = 'nosuchsandbox0000000';
    expectError(await api('GET', `/sandboxes/${ghost}`), 404, 'GET unknown sandbox');
    expectError(await api('DELETE', `/sandboxes/${ghost}`), 404, 'DELETE unknown sandbox');
    expectError(await api('POST', `/sandboxes/${ghost}/timeout`, { body: '{"timeout":60}' }), 404, 'POST timeout of unknown sandbox');
    expectError(await api('POST', `/sandboxes/${ghost}/connect`, { body: '{"timeout":60}' }), 404, 'POST connect of unknown sandbox');
    expectError(await api('POST', `/v2/sandboxes/${ghost}/connect`, { body: '{}' }), 404, 'POST v2 connect of unknown sandbox');
    // Wrong or missing key, including on requests that would change state.
    const wrong = 'e2b_' + '0'.repeat(40);
    for (const key of [wrong, null]) {
      const label = key ? 'wrong key' : 'no key';
      expectError(await api('GET', '/v2/sandboxes', { key }), 401, `GET /v2/sandboxes with ${label}`);
      expectError(await api('POST', '/v2/sandboxes', { key, body: '{"templateID":"base"}' }), 401, `POST /v2/sandboxes with ${label}`);
      expectError(await api('POST', '/sandboxes', { key, body: '{"templateID":"base"}' }), 401, `POST /sandboxes with ${label}`);
      expectError(await api('DELETE', `/sandboxes/${second.sandboxId}`, { key }), 401, `DELETE with ${label}`);
      expectError(await api('POST', `/sandboxes/${second.sandboxId}/timeout`, { key, body: '{"timeout":1}' }), 401, `POST timeout with ${label}`);
    }
    // The SDK maps 401 to AuthenticationError.
    await rejects(Sandbox.create({ apiKey: wrong }), AuthenticationError, 'Sandbox.create with a wrong key');
    await rejects(Sandbox.kill(second.sandboxId, { apiKey: wrong }), AuthenticationError, 'Sandbox.kill with a wrong key');

    const after = await listIds();
    eq(after.join(','), before.join(','), 'sandbox ids after the bad requests');
    eq(await second.isRunning(), true, 'second sandbox still running');
    const info = await second.getInfo();
    ok(info.endAt.getTime() - Date.now() > 30_000, 'second sandbox timeout not shortened', info.endAt);
  });

  await check('kill (true, then false)', async () => {
    eq(await Sandbox.kill(second.sandboxId), true, 'Sandbox.kill of a live sandbox');
    eq(await Sandbox.kill(second.sandboxId), false, 'Sandbox.kill again');
    created.delete(second.sandboxId);
    await rejects(Sandbox.getInfo(second.sandboxId), NotFoundError, 'getInfo after kill');
    // The instance method: boolean from 2.9 on (2.8.x resolves to undefined).
    const r = await sbx.kill();
    ok(r === true || r === undefined, 'sbx.kill() of a live sandbox', r);
    created.delete(sbx.sandboxId);
    eq(await Sandbox.kill(sbx.sandboxId), false, 'Sandbox.kill after sbx.kill()');
    const left = await listSdk({ metadata: { compat_run: RUN } });
    eq(left.length, 0, 'sandboxes of this run left in list()');
  });

  await check('isRunning() after kill', async () => {
    const running = await second.isRunning();
    // SDKs before 2.14.1 probe GET /health with only X-Access-Token; the
    // server answers for that sandbox (502 once it is gone).
    eq(running, false, 'isRunning() of a killed sandbox');
  });
}
