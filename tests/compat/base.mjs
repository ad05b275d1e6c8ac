// The out-of-the-box acceptance (issue 17): against `sbx serve` started with
// no template flags on a store holding the image `base`, the SDK's defaults
// alone (no template, no user) must give E2B's base image: `user`, git and
// python3. Prints "base e2b@V: N passed, N failed, 0 skipped".
//   node base.mjs SDK_PREFIX   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set)
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const prefix = process.argv[2];
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
  e2b = req('e2b'); // some 2.x ESM builds fail under Node 20
}
const { Sandbox } = e2b;
let pass = 0, fail = 0;
const check = (ok, what, got) => {
  if (ok) { pass++; console.log(`  ok   ${what}`); } else { fail++; console.log(`  FAIL ${what}: ${JSON.stringify(got)}`); }
};

let sbx;
try {
  // The user's script, unmodified: E2B's defaults throughout.
  sbx = await Sandbox.create();
  const r = await sbx.commands.run('whoami && git --version && python3 -V');
  console.log(r.stdout.trimEnd().split('\n').map((l) => `  | ${l}`).join('\n'));
  const lines = r.stdout.trim().split('\n');
  check(lines[0] === 'user', 'whoami is user', lines[0]);
  check(/^git version \d/.test(lines[1] || ''), 'git --version', lines[1]);
  check(/^Python 3\.\d+/.test(lines[2] || ''), 'python3 -V', lines[2]);
  const t = await sbx.commands.run('pwd; echo $HOME; pip3 --version | cut -d" " -f1; tput -T xterm cols; ' +
    'ps -p 1 -o pid= | tr -d " "; curl --version | head -n1 | cut -d" " -f1; command -v sudo');
  check(t.stdout === '/home/user\n/home/user\npip\n80\n1\ncurl\n/usr/bin/sudo\n',
    'cwd and HOME /home/user; pip, tput, procps, curl, sudo', t.stdout);
  await sbx.files.write('rel.txt', 'x');
  const who = await sbx.commands.run('stat -c %U /home/user/rel.txt');
  check(who.stdout.trim() === 'user', 'a relative file path is under /home/user, owned by user', who.stdout);
  // Directories a write or makeDir creates are the user's (envd's rule).
  await sbx.files.write('w/x/y.txt', 'y');
  await sbx.files.makeDir('d/a/b');
  const own = await sbx.commands.run('touch w/x/z d/a/z && stat -c %U w w/x d d/a d/a/b');
  check(own.stdout === 'user\n'.repeat(5), 'parents made by files.write and makeDir belong to user', own.stdout);
  const root = await sbx.commands.run('whoami; cat /etc/sudoers.d/user', { user: 'root' });
  check(root.stdout === 'root\nuser ALL=(ALL:ALL) NOPASSWD: ALL\n', "an explicit user: 'root' wins; user's sudo rule", root.stdout);
  // E2B's base image gives `user` passwordless sudo; sbx's broker does it
  // (no set-uid, no network): root, a root-only write, back to user after.
  const su = await sbx.commands.run('sudo whoami && sudo sh -c "echo ok > /root/sbx-sudo" && sudo cat /root/sbx-sudo ' +
    '&& ! cat /root/sbx-sudo 2>/dev/null && sudo -u user id -un && whoami');
  check(su.stdout === 'root\nok\nuser\nuser\n', 'passwordless sudo: root, a root-only write, sudo -u user', su.stdout);
} catch (err) {
  fail++;
  console.log(`  FAIL ${err?.name}: ${err?.message}`);
} finally {
  if (sbx) await sbx.kill().catch(() => {});
}
console.log(`base e2b@${VERSION}: ${pass} passed, ${fail} failed, 0 skipped`);
process.exit(fail ? 1 : 0);
