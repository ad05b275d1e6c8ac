// Port routing with the unmodified `e2b` SDK (docs/server.md, "Port routing"):
// a server started in the sandbox with commands.run(..., {background: true})
// is reached at sandbox.getHost(port) = PORT-ID.DOMAIN, where DOMAIN is what
// `sbx serve` answers (by default ADDR.sslip.io:PORT). sslip.io names resolve
// to the address they spell; this test resolves them the same way itself, so
// it needs no DNS. Also: the E2b-Sandbox-Id/-Port header route, a closed port
// (502), allowPublicTraffic: false with the SDK's trafficAccessToken, and a
// WebSocket server (tests/integration/porthelper, uploaded with files.write;
// SBX_PORTHELPER names it, else that check is skipped) reached at getHost()
// for 1800 ping/pong and 1800 message round trips (30 minutes of a client
// pinging every second).
//
//   node ports.mjs SDK_PREFIX      (SDK_PREFIX/node_modules/e2b, from install.sh)
//
// Environment as for suite.mjs (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
// Ends with "ports e2b@VER: N passed, N failed, N skipped"; exit 0 when nothing failed.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const prefix = process.argv[2];
if (!prefix || !process.env.E2B_API_URL || !process.env.E2B_SANDBOX_URL || !process.env.E2B_API_KEY) {
  console.error('usage: E2B_API_URL=.. E2B_SANDBOX_URL=.. E2B_API_KEY=.. node ports.mjs SDK_PREFIX');
  process.exit(2);
}
const SANDBOX_URL = process.env.E2B_SANDBOX_URL.replace(/\/+$/, '');
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
const TAG = `ports e2b@${VERSION}`;

let passed = 0, failed = 0, skipped = 0;
class Skip extends Error {}
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`PASS ${name}`);
  } catch (err) {
    if (err instanceof Skip) {
      skipped++;
      console.log(`SKIP ${name}: ${err.message}`);
    } else {
      failed++;
      console.log(`FAIL ${name}: ${err && err.stack ? err.stack : err}`);
    }
  }
}
function ok(cond, what) {
  if (!cond) throw new Error(what);
}

// What sslip.io / nip.io DNS would answer: the IPv4 address the name spells.
function sslipLookup(hostname, opts, cb) {
  const m = /(\d+)[.-](\d+)[.-](\d+)[.-](\d+)\.(sslip|nip)\.io\.?$/i.exec(hostname);
  if (!m) return cb(Object.assign(new Error(`not an sslip.io name: ${hostname}`), { code: 'ENOTFOUND' }));
  const ip = m.slice(1, 5).join('.');
  if (opts && opts.all) cb(null, [{ address: ip, family: 4 }]);
  else cb(null, ip, 4);
}

// GET http://HOST/PATH where HOST is what getHost() returned.
function getVia(host, path, headers = {}) {
  const u = new URL(`http://${host}${path}`);
  return new Promise((resolve, reject) => {
    const r = http.request(
      { hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, headers, lookup: sslipLookup, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body, headers: res.headers }));
      },
    );
    r.setTimeout(30_000, () => r.destroy(new Error(`GET ${host}${path}: no answer in 30 s`)));
    r.on('error', reject);
    r.end();
  });
}

async function until200(host, path, headers) {
  let last;
  for (let i = 0; i < 100; i++) {
    last = await getVia(host, path, headers);
    if (last.status === 200) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${host}${path}: ${last.status} ${last.body}`);
}

const HTTPD = (port, text) =>
  `mkdir -p /tmp/www && echo '${text}' > /tmp/www/index.html && exec busybox httpd -f -p ${port} -h /tmp/www`;

// ---- a minimal WebSocket client over node:http's upgrade ----------------------
function wsOpen(host, path) {
  const key = Buffer.from(Array.from({ length: 16 }, (_, i) => i * 7 + 3)).toString('base64');
  const u = new URL(`http://${host}${path}`);
  return new Promise((resolve, reject) => {
    const r = http.request({
      hostname: u.hostname, port: u.port || 80, path: u.pathname, lookup: sslipLookup, agent: false,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13' },
    });
    r.on('upgrade', (res, socket, head) => {
      const want = createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
      if (res.headers['sec-websocket-accept'] !== want) return reject(new Error('bad Sec-WebSocket-Accept'));
      socket.setNoDelay(true);
      let buf = head && head.length ? Buffer.from(head) : Buffer.alloc(0);
      let waiting = null;
      const pump = () => {
        if (!waiting || buf.length < 2) return;
        const n = buf[1] & 127; // server frames: unmasked, short in this test
        if (buf.length < 2 + n) return;
        const frame = { op: buf[0] & 15, data: buf.subarray(2, 2 + n).toString() };
        buf = buf.subarray(2 + n);
        const w = waiting;
        waiting = null;
        w.resolve(frame);
      };
      socket.on('data', (d) => { buf = Buffer.concat([buf, d]); pump(); });
      socket.on('close', () => waiting && waiting.reject(new Error('websocket closed')));
      resolve({
        send(op, text) {
          const p = Buffer.from(text);
          const mask = Buffer.from([1, 2, 3, 4]);
          const f = Buffer.alloc(6 + p.length);
          f[0] = 0x80 | op;
          f[1] = 0x80 | p.length;
          mask.copy(f, 2);
          for (let i = 0; i < p.length; i++) f[6 + i] = p[i] ^ mask[i & 3];
          socket.write(f);
        },
        next() {
          return new Promise((res2, rej2) => { waiting = { resolve: res2, reject: rej2 }; pump(); });
        },
        close() { socket.destroy(); },
      });
    });
    r.on('response', (res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
    r.on('error', reject);
    r.end();
  });
}

const made = [];
async function main() {
  const sbx = await Sandbox.create();
  made.push(sbx);
  let host;
  await check('getHost(port) is PORT-ID.DOMAIN', async () => {
    host = sbx.getHost(8000);
    ok(host.startsWith(`8000-${sbx.sandboxId}.`), `getHost(8000) = ${host}`);
    ok(/\.(sslip|nip)\.io(:\d+)?$/.test(host), `the server's default domain is an sslip.io name: ${host}`);
  });
  await check('a background server in the sandbox answers at getHost(port)', async () => {
    await sbx.commands.run(HTTPD(8000, 'hello from the sandbox'), { background: true });
    const r = await until200(host, '/');
    ok(r.body === 'hello from the sandbox\n', `body ${JSON.stringify(r.body)}`);
  });
  await check('the E2b-Sandbox-Id / E2b-Sandbox-Port headers route too', async () => {
    const r = await fetch(`${SANDBOX_URL}/index.html`, {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' },
    });
    ok(r.status === 200, `status ${r.status}`);
    ok((await r.text()) === 'hello from the sandbox\n', 'body');
  });
  await check('a port nothing listens on is 502 with a message', async () => {
    const r = await getVia(sbx.getHost(8001), '/');
    ok(r.status === 502, `status ${r.status}`);
    ok(/port is not open/.test(JSON.parse(r.body).message), r.body);
  });
  await check('a WebSocket server in the sandbox: 3600 round trips through getHost(port)', async () => {
    const helper = process.env.SBX_PORTHELPER;
    if (!helper || !existsSync(helper)) throw new Skip('SBX_PORTHELPER (tests/integration/porthelper) is not set');
    const bin = readFileSync(helper);
    await sbx.files.write('/tmp/porthelper', bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength));
    await sbx.commands.run('chmod 755 /tmp/porthelper');
    await sbx.commands.run('exec /tmp/porthelper 8002', { background: true });
    await until200(sbx.getHost(8002), '/');
    const ws = await wsOpen(sbx.getHost(8002), '/ws');
    const t0 = Date.now();
    for (let i = 0; i < 1800; i++) {
      ws.send(0x9, `ping ${i}`);
      let f = await ws.next();
      ok(f.op === 0xa && f.data === `ping ${i}`, `pong ${i}: ${JSON.stringify(f)}`);
      ws.send(0x1, `step ${i}`);
      f = await ws.next();
      ok(f.op === 0x1 && f.data === `step ${i}`, `echo ${i}: ${JSON.stringify(f)}`);
    }
    console.log(`     3600 round trips in ${Date.now() - t0} ms`);
    ws.close();
  });
  await check('allowPublicTraffic: false needs the trafficAccessToken', async () => {
    const priv = await Sandbox.create({ network: { allowPublicTraffic: false } });
    made.push(priv);
    const tok = priv.trafficAccessToken;
    ok(typeof tok === 'string' && tok.length > 0, `trafficAccessToken ${tok}`);
    await priv.commands.run(HTTPD(8000, 'private'), { background: true });
    const h = priv.getHost(8000);
    const r = await until200(h, '/', { 'e2b-traffic-access-token': tok });
    ok(r.body === 'private\n', `body ${JSON.stringify(r.body)}`);
    const none = await getVia(h, '/');
    ok(none.status === 403, `without the token: ${none.status}`);
    const wrong = await getVia(h, '/', { 'e2b-traffic-access-token': 'x' + tok.slice(1) });
    ok(wrong.status === 403, `a wrong token: ${wrong.status}`);
  });
}

try {
  await main();
} catch (err) {
  failed++;
  console.log(`FAIL setup: ${err && err.stack ? err.stack : err}`);
} finally {
  for (const s of made) await s.kill().catch(() => {});
}
console.log(`${TAG}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
