#!/usr/bin/env bash
# Runs the Meson test suite of one build dir and prints the Criterion totals as
# "label: N passed, N failed, N skipped". Exit status is meson's.
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD_DIR [meson test args...]}
shift
label=$(basename "$build")
rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=$?
# The suite's own scratch file system for writable layers (tests/meson.build):
# unmounted and deleted, so the next run starts from nothing.
if [ -e "$build/test-scratch.img" ]; then
  umount -l "$build/test-scratch" 2>/dev/null
  rm -f "$build/test-scratch.img" "$build/test-scratch.lock"
  rmdir "$build/test-scratch" 2>/dev/null
fi
python3 - "$build/meson-logs/testlog.json" "$label" <<'PY'
import json, re, sys
path, label = sys.argv[1], sys.argv[2]
passed = failed = skipped = 0
syn = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
for line in open(path):
    t = json.loads(line)
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    m = syn.search(out)
    if m:
        tested, ok, bad, crash = map(int, m.groups())
        passed += ok; failed += bad + crash
        skipped += len(re.findall(r"\[SKIP\]", out))
    elif t.get("result") == "OK":
        passed += 1
    elif t.get("result") == "SKIP":
        skipped += 1
    else:
        failed += 1
print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped")
open(path + ".totals", "w").write(f"{passed} {failed} {skipped}\n")
PY
exit $rc
