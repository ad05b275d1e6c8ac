// Compatibility suite: drives one pinned version of the official `e2b` npm SDK
// against `sbx serve`: the SDK calls behind docs/server.md's endpoint matrix.
//
//   node suite.mjs SDK_PREFIX      (SDK_PREFIX/node_modules/e2b, from install.sh)
//
// Environment: E2B_API_URL and E2B_SANDBOX_URL (both the server's base URL),
// E2B_API_KEY (the server's key). Optional: SBX_COMPAT_TEMPLATE (template of
// the extra sandboxes, default "base"), SBX_COMPAT_LARGE_MB (default 32).
//
// Every check prints one line, PASS / FAIL / SKIP (skips always say why). The
// suite stops at the first failure, printing what it got and what it expected,
// kills every sandbox it created, and ends with
//   e2b@VER: N passed, N failed, N skipped
// Exit status: 0 when nothing failed.
import {
  API,
  loader,
  Sandbox,
  TAG,
  RUN,
  passed,
  failed,
  skipped,
  Failed,
  eq,
  ok,
  check,
  created,
  create,
  harnessFailed,
} from './suite_lib.mjs';
import { commandChecks } from './suite_commands.mjs';
import { fileChecks } from './suite_files.mjs';
import { sandboxChecks } from './suite_sandbox.mjs';

// ---- the checks ---------------------------------------------------------------
let sbx; // the main sandbox

async function main() {
  console.log(`# ${TAG} loaded as ${loader}; API ${API}; run ${RUN}`);

  await check('create (default template)', async () => {
    sbx = await create({ metadata: { role: 'main' }, envs: { SBX_COMPAT_CREATE_ENV: 'from-create' } });
    ok(typeof sbx.sandboxId === 'string' && sbx.sandboxId.length > 0, 'sandboxId is a non-empty string', sbx.sandboxId);
    eq(await sbx.isRunning(), true, 'isRunning()');
  });

  await commandChecks(sbx);
  await fileChecks(sbx);
  await sandboxChecks(sbx);
}

let code = 0;
try {
  await main();
} catch (err) {
  if (!(err instanceof Failed)) {
    harnessFailed();
    console.log(`FAIL ${TAG} (harness): ${err?.stack || err}`);
  }
  code = 1;
} finally {
  for (const id of created) {
    try {
      await Sandbox.kill(id);
    } catch (err) {
      console.log(`# cleanup: kill ${id}: ${err.message}`);
    }
  }
}
console.log(`${TAG}: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(code);
