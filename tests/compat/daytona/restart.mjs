// Daytona API across a server restart (run by run.sh around a SIGTERM and a
// restart on the same state dir):
//   node restart.mjs SDK_PREFIX before|after NAME
// before: creates sandbox NAME (label, intervals, a file); after: finds it by
// name with the same labels and intervals, reads the file, deletes it, and
// (the server now runs with SBX_SERVE_DAYTONA_FAIL_CREATES=1:429) sees one
// create answered 429 with Retry-After.
// Prints PASS/FAIL lines and `restart-<phase>: N passed, N failed, 0 skipped`.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [prefix, phase, name] = process.argv.slice(2);
const req = createRequire(join(prefix, 'package.json'));
const { Daytona, DaytonaRateLimitError } = req('@daytonaio/sdk');
const daytona = new Daytona();
const IMAGE = process.env.SBX_DAYTONA_IMAGE || 'bash';
let passed = 0, failed = 0;
const eq = (got, want, what) => {
  if (JSON.stringify(got) !== JSON.stringify(want))
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
};
try {
  if (phase === 'before') {
    const sb = await daytona.create(
      { name, image: IMAGE, labels: { 'sbx-restart': name }, autoStopInterval: 33, autoDeleteInterval: 7 },
      { timeout: 120 });
    await sb.fs.uploadFile(Buffer.from('kept\n'), '/tmp/kept.txt');
    eq(sb.name, name, 'name');
  } else {
    const sb = await daytona.get(name);
    eq([sb.name, sb.labels['sbx-restart'], sb.autoStopInterval, sb.autoDeleteInterval, sb.state],
      [name, name, 33, 7, 'started'], 'name, label, intervals, state after the restart');
    const r = await sb.process.executeCommand('cat /tmp/kept.txt', undefined, undefined, 10);
    eq(r.result, 'kept\n', 'the sandbox itself survived');
    await sb.delete();
    let err;
    try {
      const x = await daytona.create({ image: IMAGE }, { timeout: 30 });
      await x.delete();
    } catch (e) {
      err = e;
    }
    eq([err instanceof DaytonaRateLimitError, err?.statusCode, err?.headers?.['retry-after']], [true, 429, '1'],
      'an injected 429: DaytonaRateLimitError with Retry-After');
  }
  passed++;
  console.log(`PASS restart ${phase}`);
} catch (err) {
  failed++;
  console.log(`FAIL restart ${phase}: ${err?.stack || err}`);
}
console.log(`restart-${phase}: ${passed} passed, ${failed} failed, 0 skipped`);
process.exit(failed ? 1 : 0);
