#!/usr/bin/env bash
# Runs the Meson test suite of one build dir and prints the totals as
# "label: N passed, N failed, N skipped", counted per test case:
#  - a Criterion program (run with --verbose, tests/meson.build) counts its
#    "Synthesis" passes and failures (crashes are among the failures) and one
#    skip per "[SKIP]" line; a program meson did not see succeed counts at
#    least one failure (a timeout, a sanitizer exit after the last test);
#  - the compat suite counts the checks of its closing "compat:" line;
#  - any other test counts 1, and exit code 77 (meson's SKIP) is a skip.
# Skipped tests are listed with their reasons. With SBX_MUST_WORK=1 (.ci/run)
# a skip counts as a failure: CI must run everything. The one exception is a
# compat check the SDK version under test has no API for, which is skipped by
# design and stays a skip.
# Exit status: non-zero when meson failed or anything was counted as failed.
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD_DIR [meson test args...]}
shift
label=$(basename "$build")
rc=0
# No totals or names of an earlier run may stand for this one.
rm -f "$build/meson-logs/testlog.json" "$build/meson-logs/testlog.json.totals" \
  "$build/meson-logs/testlog.json.failed"
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=$?
# The suite's own scratch file system for writable layers (tests/meson.build):
# unmounted and deleted, so the next run starts from nothing.
if [ -e "$build/test-scratch.img" ]; then
  umount -l "$build/test-scratch" 2>/dev/null
  rm -f "$build/test-scratch.img" "$build/test-scratch.lock"
  rmdir "$build/test-scratch" 2>/dev/null
fi
python3 - "$build/meson-logs/testlog.json" "$label" "${SBX_MUST_WORK:-0}" <<'PY' || rc=1
import json, re, sys
path, label, must_work = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
passed = failed = skipped = 0
skips = []        # (test, reason): something missing on this machine
by_design = 0     # compat checks an older SDK has no API for, n/a cases
syn = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
crit_skip = re.compile(r"^\[SKIP\] (.*)$", re.M)
crit_fail = re.compile(r"^\[FAIL\] ([^:\s]+::[^:\s]+)", re.M)
fails = []        # names of what failed, for the closing line (CI shows the tail)
compat = re.compile(r"^compat: \d+ versions, (\d+) passed, (\d+) failed, (\d+) skipped$", re.M)
for line in open(path):
    t = json.loads(line)
    name, result = t.get("name", "?"), t.get("result")
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    m = syn.search(out)
    c = compat.findall(out)
    if m:
        tested, ok, bad, crash = map(int, m.groups())
        passed += ok
        failed += bad
        fails += [f"{name}/{c}" for c in crit_fail.findall(out)]
        if result not in ("OK", "SKIP") and bad == 0:
            failed += 1
            fails.append(f"{name} ({result})")
        for r in crit_skip.findall(out):
            # A case that cannot apply to what is tested (the conformance
            # suite's providers) is skipped by design, not for want of a tool.
            if "not applicable: " in r:
                by_design += 1
            else:
                skips.append((name, r))
    elif c:
        p, f, s = map(int, c[-1])
        passed += p
        failed += f + (1 if result != "OK" and f == 0 else 0)
        if f or result != "OK":
            fails.append(f"{name} ({result})")
        by_design += s
    elif result == "OK":
        passed += 1
    elif result == "SKIP":
        reason = next((l for l in reversed(out.strip().splitlines()) if l.strip()), "exit code 77")
        skips.append((name, reason))
    else:
        failed += 1
        fails.append(f"{name} ({result})")
for name, reason in skips:
    print(f"{label}: skipped {name}: {reason}")
if must_work and skips:
    print(f"{label}: SBX_MUST_WORK=1 and {len(skips)} test(s) skipped: counted as failed")
    failed += len(skips)
    fails += [f"{name} (skipped: {reason})" for name, reason in skips]
else:
    skipped += len(skips)
skipped += by_design
print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped")
open(path + ".totals", "w").write(f"{passed} {failed} {skipped}\n")
open(path + ".failed", "w").write("".join(f"{label}: {n}\n" for n in fails))
sys.exit(1 if failed else 0)
PY
exit $rc
