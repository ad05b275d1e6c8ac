// The harness of the E2B SDK compatibility suite (suite.mjs): loads the SDK
// under test, counts and prints checks, and the HTTP and SDK helpers the
// checks share.
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const prefix = process.argv[2] || process.env.SBX_COMPAT_SDK;
if (!prefix) {
  console.error('usage: node suite.mjs SDK_PREFIX');
  process.exit(2);
}
const API = (process.env.E2B_API_URL || '').replace(/\/+$/, '');
const KEY = process.env.E2B_API_KEY || '';
if (!API || !process.env.E2B_SANDBOX_URL || !KEY) {
  console.error('suite: set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY');
  process.exit(2);
}
const LARGE_MB = Number(process.env.SBX_COMPAT_LARGE_MB || 32);
const CHECK_TIMEOUT_MS = 180_000;

// ---- loading the SDK --------------------------------------------------------
// The ES-module build of some 2.x releases fails under Node 20 ("Dynamic
// require of undici is not supported"): fall back to the CommonJS build.
const pkgDir = join(prefix, 'node_modules', 'e2b');
const req = createRequire(join(prefix, 'package.json'));
const VERSION = req(join(pkgDir, 'package.json')).version;
let e2b;
let loader = 'esm';
try {
  const esm = join(pkgDir, 'dist', 'index.mjs');
  if (!existsSync(esm)) throw new Error('no ESM build');
  e2b = await import(pathToFileURL(esm).href);
  if (typeof e2b.Sandbox !== 'function') throw new Error('no Sandbox export');
} catch (err) {
  loader = `cjs (esm: ${err.message.split('\n')[0]})`;
  e2b = req('e2b');
}
const { Sandbox, CommandExitError, NotFoundError, AuthenticationError } = e2b;
const FileNotFound = e2b.FileNotFoundError || NotFoundError; // 2.8.x has only NotFoundError
const TAG = `e2b@${VERSION}`;
// What this SDK version can send (older ones lack file metadata, watch
// entries, lifecycle): checks of a missing feature are skipped, saying so.
const SDK_SRC = readFileSync(join(pkgDir, 'dist', 'index.js'), 'utf8');
const sdkHas = (s) => SDK_SRC.includes(s);
const RUN = `${process.pid}-${Date.now().toString(36)}`; // metadata value unique to this run

// ---- tiny harness ----------------------------------------------------------
let passed = 0;
let failed = 0;
let skipped = 0;
class Skip extends Error {}
class Failed extends Error {}
const skip = (reason) => {
  throw new Skip(reason);
};
const show = (v) => {
  if (v instanceof Uint8Array) return `<${v.length} bytes>`;
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 300 ? s.slice(0, 300) + '…' : s;
};
function eq(actual, expected, what) {
  if (actual !== expected) throw new Error(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}
function ok(cond, what, actual) {
  if (!cond) throw new Error(`${what}${actual === undefined ? '' : `: got ${show(actual)}`}`);
}
// Expects `p` to reject with an instance of `cls`; returns the error.
async function rejects(p, cls, what) {
  let res;
  try {
    res = await p;
  } catch (err) {
    if (cls && !(err instanceof cls))
      throw new Error(`${what}: expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
    return err;
  }
  throw new Error(`${what}: expected ${cls ? cls.name : 'an error'}, got success ${show(res)}`);
}
function withTimeout(p, ms, what) {
  let t;
  return Promise.race([
    p,
    new Promise((_, rej) => {
      t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}
const semverAtLeast = (v, min) => {
  const a = v.split(/[.-]/).map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((a[i] || 0) !== b[i]) return (a[i] || 0) > b[i];
  return true;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`${what}: not true within ${ms / 1000} s`);
    await sleep(100);
  }
}

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await withTimeout(Promise.resolve().then(fn), CHECK_TIMEOUT_MS, name);
    passed++;
    console.log(`PASS ${TAG} ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    if (err instanceof Skip) {
      skipped++;
      console.log(`SKIP ${TAG} ${name}: ${err.message}`);
      return;
    }
    failed++;
    console.log(`FAIL ${TAG} ${name}: ${err?.constructor?.name}: ${err?.message}${err instanceof CommandExitError ? ` (exit ${err.exitCode}, stderr ${show(err.stderr)})` : ''}`);
    if (err?.stack && !(err.message || '').includes('expected')) console.log(err.stack.split('\n').slice(1, 6).join('\n'));
    throw new Failed(name);
  }
}

// ---- plain HTTP against the control plane -----------------------------------
async function api(method, path, { key = KEY, body, headers = {}, duplex } = {}) {
  const h = { ...headers };
  if (key !== null) h['X-API-KEY'] = key;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(API + path, { method, headers: h, body, ...(duplex ? { duplex } : {}) });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, ctype: res.headers.get('content-type') || '', text, json, headers: res.headers };
}
// A request body fetch sends with Transfer-Encoding: chunked.
const chunked = (text) =>
  new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(text));
      c.close();
    },
  });
// Every live sandbox id, following X-Next-Token.
async function listIds() {
  const ids = [];
  let next = '';
  for (let page = 0; page < 100; page++) {
    const r = await api('GET', `/v2/sandboxes?limit=100${next ? `&nextToken=${encodeURIComponent(next)}` : ''}`);
    eq(r.status, 200, 'GET /v2/sandboxes status');
    ok(Array.isArray(r.json), 'GET /v2/sandboxes body is a JSON array', r.text);
    for (const s of r.json) ids.push(s.sandboxID);
    next = r.headers.get('x-next-token') || '';
    if (!next) return ids.sort();
  }
  throw new Error('GET /v2/sandboxes: more than 100 pages');
}
function expectError(r, status, what) {
  eq(r.status, status, `${what}: HTTP status`);
  ok(r.json && typeof r.json === 'object', `${what}: body is JSON`, r.text);
  eq(r.json.code, status, `${what}: JSON code`);
  ok(typeof r.json.message === 'string' && r.json.message.length > 0, `${what}: JSON message`, r.text);
}

// ---- SDK helpers --------------------------------------------------------------
const created = new Set();
async function create(opts = {}) {
  const sb = await Sandbox.create({ ...opts, metadata: { compat_run: RUN, ...(opts.metadata || {}) } });
  created.add(sb.sandboxId);
  return sb;
}
async function listSdk(query) {
  const pager = Sandbox.list({ query });
  const out = [];
  for (let i = 0; i < 100 && pager.hasNext; i++) out.push(...(await pager.nextItems()));
  return out;
}

// Working directory of the file checks (suite_files.mjs, then the others).
const D = '/home/user/compat';

// A failure outside any check (suite.mjs).
function harnessFailed() {
  failed++;
}

export {
  prefix,
  API,
  KEY,
  LARGE_MB,
  CHECK_TIMEOUT_MS,
  pkgDir,
  req,
  VERSION,
  e2b,
  loader,
  Sandbox,
  CommandExitError,
  NotFoundError,
  AuthenticationError,
  FileNotFound,
  TAG,
  SDK_SRC,
  sdkHas,
  RUN,
  passed,
  failed,
  skipped,
  Skip,
  Failed,
  skip,
  show,
  eq,
  ok,
  rejects,
  withTimeout,
  semverAtLeast,
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
  harnessFailed,
};
