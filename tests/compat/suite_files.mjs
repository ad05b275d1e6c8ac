// The files checks of the E2B SDK compatibility suite (suite.mjs): read,
// write, list, rename, remove, large files, entry info, metadata, watchDir,
// stdin streaming, signed URLs.
import { createHash, randomBytes } from 'node:crypto';
import {
  LARGE_MB,
  Sandbox,
  CommandExitError,
  FileNotFound,
  TAG,
  sdkHas,
  RUN,
  skip,
  eq,
  ok,
  rejects,
  semverAtLeast,
  waitFor,
  check,
  D,
} from './suite_lib.mjs';

export async function fileChecks(sbx) {
  const content = `hello files from ${TAG}\n`;
  await check('files.write / files.read', async () => {
    const w = await sbx.files.write(`${D}/a.txt`, content);
    eq(w.path, `${D}/a.txt`, 'WriteInfo.path');
    eq(w.name, 'a.txt', 'WriteInfo.name');
    eq(await sbx.files.read(`${D}/a.txt`), content, 'read back (text)');
    const bytes = await sbx.files.read(`${D}/a.txt`, { format: 'bytes' });
    eq(Buffer.from(bytes).toString(), content, 'read back (bytes)');
    const r = await sbx.commands.run(`cat ${D}/a.txt`);
    eq(r.stdout, content, 'cat inside the sandbox');
    await sbx.files.write(`${D}/a.txt`, 'short');
    eq(await sbx.files.read(`${D}/a.txt`), 'short', 'overwrite truncates');
    await sbx.files.write(`${D}/a.txt`, content);
    await sbx.files.write(`${D}/empty`, '');
    eq(await sbx.files.read(`${D}/empty`), '', 'empty file');
    await rejects(sbx.files.read(`${D}/missing.txt`), FileNotFound, 'read of a missing file');
  });

  await check('files.exists', async () => {
    eq(await sbx.files.exists(`${D}/a.txt`), true, 'exists(a.txt)');
    eq(await sbx.files.exists(D), true, 'exists(dir)');
    eq(await sbx.files.exists(`${D}/missing.txt`), false, 'exists(missing.txt)');
  });

  await check('files.makeDir', async () => {
    eq(await sbx.files.makeDir(`${D}/sub/deep`), true, 'makeDir(new nested dir)');
    eq(await sbx.files.makeDir(`${D}/sub/deep`), false, 'makeDir(existing dir)');
    const r = await sbx.commands.run(`test -d ${D}/sub/deep && echo dir`);
    eq(r.stdout, 'dir\n', 'directory exists inside the sandbox');
  });

  await check('files.list', async () => {
    await sbx.files.write(`${D}/sub/deep/n.txt`, 'nested');
    const entries = await sbx.files.list(D);
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
    eq(Object.keys(byName).sort().join(','), 'a.txt,empty,sub', 'entry names (depth 1)');
    eq(byName['a.txt'].type, 'file', 'a.txt type');
    eq(byName['a.txt'].path, `${D}/a.txt`, 'a.txt path');
    eq(byName.sub.type, 'dir', 'sub type');
    if ('size' in byName['a.txt']) eq(Number(byName['a.txt'].size), content.length, 'a.txt size');
    const deep = await sbx.files.list(D, { depth: 3 });
    ok(deep.some((e) => e.path === `${D}/sub/deep/n.txt`), 'list(depth 3) reaches sub/deep/n.txt', deep.map((e) => e.path));
    await rejects(sbx.files.list(`${D}/nope`), null, 'list of a missing directory');
  });

  await check('files.rename', async () => {
    const e = await sbx.files.rename(`${D}/a.txt`, `${D}/b.txt`);
    eq(e.path, `${D}/b.txt`, 'EntryInfo.path of the renamed file');
    eq(e.name, 'b.txt', 'EntryInfo.name');
    eq(await sbx.files.exists(`${D}/a.txt`), false, 'old path gone');
    eq(await sbx.files.read(`${D}/b.txt`), content, 'content under the new name');
    await rejects(sbx.files.rename(`${D}/missing`, `${D}/x`), null, 'rename of a missing path');
  });

  await check('files.remove', async () => {
    await sbx.files.remove(`${D}/b.txt`);
    eq(await sbx.files.exists(`${D}/b.txt`), false, 'file removed');
    await sbx.files.remove(`${D}/sub`);
    eq(await sbx.files.exists(`${D}/sub`), false, 'non-empty directory removed');
    const r = await sbx.commands.run(`ls -A ${D}`);
    eq(r.stdout, 'empty\n', 'what is left');
  });

  await check(`files large (${LARGE_MB} MiB round trip)`, async () => {
    const big = randomBytes(LARGE_MB << 20);
    const sum = createHash('sha256').update(big).digest('hex');
    const ab = big.buffer.slice(big.byteOffset, big.byteOffset + big.length);
    const w = await sbx.files.write(`${D}/big.bin`, ab);
    eq(w.path, `${D}/big.bin`, 'WriteInfo.path');
    const r = await sbx.commands.run(`wc -c < ${D}/big.bin`);
    eq(r.stdout.trim(), String(big.length), 'size inside the sandbox');
    const back = await sbx.files.read(`${D}/big.bin`, { format: 'bytes' });
    eq(back.length, big.length, 'bytes read back');
    eq(createHash('sha256').update(back).digest('hex'), sum, 'sha256 of what was read back');
    await sbx.files.remove(`${D}/big.bin`);
  });

  await check('files.remove of a missing path (success, as envd)', async () => {
    // envd removes with os.RemoveAll: nothing there is not an error.
    await sbx.files.remove(`${D}/never-existed`);
    await sbx.files.remove(`${D}/no/such/dir`);
  });

  await check('envd version and entry info (size, mode, owner, mtime, symlink)', async () => {
    const info = await Sandbox.getInfo(sbx.sandboxId);
    ok(semverAtLeast(info.envdVersion || '0.0.0', '0.6.3'), 'envdVersion >= 0.6.3 (file metadata, watch entries)', info.envdVersion);
    await sbx.commands.run(`mkdir -p ${D}/ei/sub && printf 12345 > ${D}/ei/f.txt && chmod 640 ${D}/ei/f.txt && ` +
      `TZ=UTC touch -d '2020-01-02 03:04:05' ${D}/ei/f.txt && ln -s f.txt ${D}/ei/rel && ln -s ../ei/sub ${D}/ei/dirlink && ` +
      `ln -s rel ${D}/ei/chain && ln -s nowhere ${D}/ei/dangling`);
    const f = await sbx.files.getInfo(`${D}/ei/f.txt`);
    eq(f.type, 'file', 'type');
    eq(f.size, 5, 'size');
    eq(f.mode, 0o640, 'mode (permission bits)');
    eq(f.permissions, '-rw-r-----', 'permissions');
    eq(f.owner, 'user', 'owner (E2B runs commands as the image\'s `user`)');
    eq(f.group, 'user', 'group');
    ok(f.modifiedTime instanceof Date, 'modifiedTime is a Date', f.modifiedTime);
    eq(f.modifiedTime.toISOString(), '2020-01-02T03:04:05.000Z', 'modifiedTime');
    eq(f.symlinkTarget, undefined, 'no symlinkTarget for a file');
    const d = await sbx.files.getInfo(`${D}/ei/sub`);
    eq(d.type, 'dir', 'directory type');
    ok(d.permissions.startsWith('d'), 'directory permissions start with d', d.permissions);
    // A symlink: the absolute, resolved target, and the target's type.
    const l = await sbx.files.getInfo(`${D}/ei/rel`);
    eq(l.symlinkTarget, `${D}/ei/f.txt`, 'symlinkTarget of a relative link (absolute)');
    eq(l.type, 'file', 'type of a link to a file');
    eq(l.permissions, 'Lrwxrwxrwx', 'permissions of a link');
    eq((await sbx.files.getInfo(`${D}/ei/chain`)).symlinkTarget, `${D}/ei/f.txt`, 'symlinkTarget through two links');
    const dl = await sbx.files.getInfo(`${D}/ei/dirlink`);
    eq(dl.symlinkTarget, `${D}/ei/sub`, 'symlinkTarget of ../ei/sub');
    eq(dl.type, 'dir', 'type of a link to a directory');
    const listed = Object.fromEntries((await sbx.files.list(`${D}/ei`)).map((e) => [e.name, e]));
    eq(listed.rel?.symlinkTarget, `${D}/ei/f.txt`, 'symlinkTarget in list()');
    eq(listed['f.txt']?.size, 5, 'size in list()');
    await sbx.files.remove(`${D}/ei`);
  });

  await check('files.write metadata (envd 0.6.2)', async () => {
    if (!sdkHas('X-Metadata-')) skip(`${TAG} sends no file metadata`);
    const w = await sbx.files.write(`${D}/meta.txt`, 'with metadata', { metadata: { owner: 'compat', run: RUN } });
    eq(w.metadata?.owner, 'compat', 'WriteInfo.metadata.owner');
    const i = await sbx.files.getInfo(`${D}/meta.txt`);
    eq(i.metadata?.owner, 'compat', 'getInfo().metadata.owner');
    eq(i.metadata?.run, RUN, 'getInfo().metadata.run');
    eq((await sbx.files.getInfo(`${D}/empty`)).metadata, undefined, 'no metadata on a plain file');
    await sbx.files.remove(`${D}/meta.txt`);
  });

  await check('watchDir with includeEntry (envd 0.6.3)', async () => {
    if (!sdkHas('includeEntry')) skip(`${TAG} has no includeEntry`);
    await sbx.files.makeDir(`${D}/w`);
    const events = [];
    const h = await sbx.files.watchDir(`${D}/w`, (e) => events.push(e), { includeEntry: true });
    try {
      await sbx.files.write(`${D}/w/new.txt`, 'abc');
      await waitFor(() => events.some((e) => e.name === 'new.txt' && e.entry), 15_000, 'an event for new.txt with entry');
      const e = events.find((x) => x.name === 'new.txt' && x.entry);
      eq(e.entry.path, `${D}/w/new.txt`, 'entry.path');
      eq(e.entry.type, 'file', 'entry.type');
      ok(typeof e.entry.size === 'number', 'entry.size is a number', e.entry.size);
    } finally {
      await h.stop();
    }
    await sbx.files.remove(`${D}/w`);
  });

  await check('stdin streaming (delivered while the process runs)', async () => {
    let out = '';
    // A reader that read(2)s its stdin. (busybox cat, the test image's cat,
    // passes nothing on until stdin closes inside a sandbox: a known gap,
    // docs/server.md, "Processes and E2B's lifecycle".)
    const h = await sbx.commands.run('while IFS= read -r l; do echo "$l"; done', { background: true, stdin: true, onStdout: (d) => (out += d) });
    await sbx.commands.sendStdin(h.pid, 'ping\n');
    await waitFor(() => out === 'ping\n', 15_000, 'the first line echoed before stdin closes');
    await sbx.commands.sendStdin(h.pid, 'pong\n');
    await waitFor(() => out === 'ping\npong\n', 15_000, 'the second line echoed');
    eq(await h.kill(), true, 'kill the reader');
    await rejects(h.wait(), CommandExitError, 'wait() after kill');
  });

  await check('signed file URLs (downloadUrl / uploadUrl)', async () => {
    await sbx.files.write(`${D}/signed.txt`, 'signed content');
    // No E2b-Sandbox-Id, no X-Access-Token: the signature alone.
    const dl = await sbx.downloadUrl(`${D}/signed.txt`);
    ok(dl.includes('signature=v1_'), 'downloadUrl carries a v1 signature', dl);
    let r = await fetch(dl);
    eq(r.status, 200, 'GET of the download URL');
    eq(await r.text(), 'signed content', 'downloaded content');
    const ul = await sbx.uploadUrl(`${D}/uploaded.txt`, { useSignatureExpiration: 60 });
    ok(ul.includes('signature_expiration='), 'uploadUrl with an expiration', ul);
    const form = new FormData();
    form.append('file', new Blob(['via signed url']), `${D}/uploaded.txt`);
    r = await fetch(ul, { method: 'POST', body: form });
    eq(r.status, 200, 'POST to the upload URL');
    eq(await sbx.files.read(`${D}/uploaded.txt`), 'via signed url', 'uploaded content');
    // A signature for another operation, a changed path, an expired one: 401.
    const u = new URL(dl);
    u.searchParams.set('path', `${D}/uploaded.txt`);
    eq((await fetch(u)).status, 401, 'download URL with another path');
    eq((await fetch(ul.replace('uploaded.txt', 'signed.txt'))).status, 401, 'upload URL used for reading another file');
    const expired = await sbx.downloadUrl(`${D}/signed.txt`, { useSignatureExpiration: -10 });
    eq((await fetch(expired)).status, 401, 'expired download URL');
    const bad = new URL(dl);
    bad.searchParams.set('signature', 'v1_' + 'A'.repeat(43));
    eq((await fetch(bad)).status, 401, 'download URL with a wrong signature');
  });
}
