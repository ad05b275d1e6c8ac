#!/usr/bin/env bash
# `make check`: the plain build's suite, then the ASan+UBSan build's suite,
# then one closing line with the totals of both.
set -uo pipefail
build=${1:-build}
asan=${2:-build-asan}
rc=0
# The e2b golden test's private store of the task base image (bootstrapped
# once, a few minutes): both passes share the plain build's. Tests never use
# the default stores (/var/lib/sbx/images, /run/sbx); `make demo` does.
mkdir -p "$build"
# This run's totals and failures only (run-tests.sh writes them anew).
rm -f "$build/meson-logs/testlog.json."{totals,failed} "$asan/meson-logs/testlog.json."{totals,failed}
SBX_TEST_TASK_IMAGE_DIR=${SBX_TEST_TASK_IMAGE_DIR:-$(cd "$build" && pwd)/test-task-images}
export SBX_TEST_TASK_IMAGE_DIR
bash scripts/run-tests.sh "$build" || rc=1
if [ ! -f "$asan/build.ninja" ]; then
  meson setup "$asan" --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || rc=1
fi
if ninja -C "$asan" >/dev/null; then
  # The sanitizer pass looks for memory errors, not scale: the long loops run
  # at full size in the plain pass above and smaller here (CI has 90 minutes).
  SBX_TEST_CYCLES=${SBX_TEST_CYCLES:-250} SBX_SOAK_EPISODES=${SBX_SOAK_EPISODES:-500} \
  SBX_E2B_EPISODES=${SBX_E2B_EPISODES:-200} SBX_SERVER_SCALE=${SBX_SERVER_SCALE:-100} \
  SBX_EVAL_TASKS=${SBX_EVAL_TASKS:-csv-region-report,fix-permissions,jq-team-directory} \
    bash scripts/run-tests.sh "$asan" || rc=1
else
  echo "check: ASan build failed"; rc=1
fi
read -r p1 f1 s1 < "$build/meson-logs/testlog.json.totals" 2>/dev/null || { p1=0; f1=1; s1=0; }
read -r p2 f2 s2 < "$asan/meson-logs/testlog.json.totals" 2>/dev/null || { p2=0; f2=1; s2=0; }
[ "$rc" -ne 0 ] && [ $((f1 + f2)) -eq 0 ] && f1=1
# The names of what failed go last, where a CI log's tail shows them.
for b in "$build" "$asan"; do
  if [ -f "$b/meson-logs/testlog.json.failed" ]; then
    sed 's/^/check: failed /' "$b/meson-logs/testlog.json.failed"
  else
    echo "check: failed $(basename "$b"): no test results (the build or meson failed; see above)"
  fi
done
echo "check: $((p1 + p2)) passed, $((f1 + f2)) failed, $((s1 + s2)) skipped"
exit $rc
