// The commands checks of the E2B SDK compatibility suite (suite.mjs): run,
// exit codes, callbacks, envs, cwd, background processes, stdin.
import {
  CommandExitError,
  TAG,
  skip,
  eq,
  ok,
  rejects,
  sleep,
  waitFor,
  check,
  create,
} from './suite_lib.mjs';

export async function commandChecks(sbx) {
  await check('commands.run stdout', async () => {
    const r = await sbx.commands.run('echo hello; printf "a\\nb"');
    eq(r.exitCode, 0, 'exitCode');
    eq(r.stdout, 'hello\na\nb', 'stdout');
    eq(r.stderr, '', 'stderr');
  });

  await check('commands.run stderr', async () => {
    const r = await sbx.commands.run('echo to-err >&2; echo to-out');
    eq(r.exitCode, 0, 'exitCode');
    eq(r.stderr, 'to-err\n', 'stderr');
    eq(r.stdout, 'to-out\n', 'stdout');
  });

  await check('commands.run non-zero exit (CommandExitError)', async () => {
    const err = await rejects(sbx.commands.run('echo out; echo oops >&2; exit 3'), CommandExitError, "run('exit 3')");
    eq(err.exitCode, 3, 'CommandExitError.exitCode');
    eq(err.stdout, 'out\n', 'CommandExitError.stdout');
    eq(err.stderr, 'oops\n', 'CommandExitError.stderr');
  });

  await check('commands.run callbacks and large output', async () => {
    let streamed = 0;
    const r = await sbx.commands.run('i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done', {
      onStdout: (d) => {
        streamed += d.length;
      },
    });
    const lines = r.stdout.split('\n');
    eq(lines.length, 20001, 'stdout line count (+1 after the last newline)');
    eq(lines[19999], 'line 19999', 'last line');
    eq(streamed, r.stdout.length, 'bytes seen by onStdout');
  });

  await check('commands.run envs', async () => {
    const r = await sbx.commands.run('echo "$FOO|$BAR|$SBX_COMPAT_CREATE_ENV"', { envs: { FOO: 'foo', BAR: 'b a r' } });
    eq(r.stdout, 'foo|b a r|from-create\n', 'stdout (request envs, then create envs)');
    const o = await sbx.commands.run('echo "$SBX_COMPAT_CREATE_ENV"', { envs: { SBX_COMPAT_CREATE_ENV: 'overridden' } });
    eq(o.stdout, 'overridden\n', 'request envs override create envs');
  });

  await check('commands.run cwd', async () => {
    const r = await sbx.commands.run('pwd', { cwd: '/tmp' });
    eq(r.stdout, '/tmp\n', 'pwd with cwd /tmp');
    await sbx.commands.run('mkdir -p /tmp/compat-cwd/x');
    const r2 = await sbx.commands.run('pwd; ls', { cwd: '/tmp/compat-cwd' });
    eq(r2.stdout, '/tmp/compat-cwd\nx\n', 'pwd; ls with cwd /tmp/compat-cwd');
    await rejects(sbx.commands.run('pwd', { cwd: '/nonexistent/dir' }), null, 'run with a missing cwd');
  });

  await check('commands.run background + kill', async () => {
    let out = '';
    const h = await sbx.commands.run('echo started; exec sleep 600', {
      background: true,
      onStdout: (d) => {
        out += d;
      },
    });
    ok(Number.isInteger(h.pid) && h.pid > 0, 'handle.pid is a positive integer', h.pid);
    await waitFor(() => out === 'started\n', 15_000, 'background stdout "started\\n"');
    const procs = await sbx.commands.list();
    ok(procs.some((p) => p.pid === h.pid), `commands.list() includes pid ${h.pid}`, procs.map((p) => p.pid));
    eq(await sbx.commands.kill(h.pid), true, 'commands.kill(pid) of a running process');
    const err = await rejects(h.wait(), CommandExitError, 'wait() after kill');
    ok(err.exitCode !== 0, 'exit code after SIGKILL is non-zero', err.exitCode);
    await waitFor(async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid), 10_000, 'killed pid leaves commands.list()');
    eq(await sbx.commands.kill(h.pid), false, 'commands.kill(pid) of a finished process');
    // A handle's own kill() as well.
    const h2 = await sbx.commands.run('exec sleep 600', { background: true });
    eq(await h2.kill(), true, 'handle.kill()');
    await rejects(h2.wait(), CommandExitError, 'handle.wait() after handle.kill()');
  });

  await check('commands.run stdin (sendStdin)', async () => {
    const h = await sbx.commands.run('head -n 2', { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, 'first\n');
    await sbx.commands.sendStdin(h.pid, 'second\nthird\n');
    const r = await h.wait();
    eq(r.exitCode, 0, 'exitCode');
    eq(r.stdout, 'first\nsecond\n', 'stdout of head -n 2');
  });

  await check('commands.run stdin (closeStdin)', async () => {
    if (typeof sbx.commands.closeStdin !== 'function') skip(`commands.closeStdin does not exist in ${TAG}`);
    const h = await sbx.commands.run('wc -c', { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, 'hello stdin');
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    eq(r.stdout.trim(), '11', 'wc -c of what was sent');
  });
}
