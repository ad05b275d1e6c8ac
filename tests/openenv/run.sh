#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs one OpenEnv test file (pytest, Debian's python3 and python3-websockets)
# against a real `sbx openenv serve` on loopback with local sandboxes. The
# bundled tasks say FROM sbx-tasks:bookworm: the image store is the test's
# own ($SBX_TEST_TASK_IMAGE_DIR, else BUILD/test-task-images, shared with the
# e2b golden test), bootstrapped from this machine's apt mirror when missing.
set -euo pipefail
test_file=$1
if [ "$(id -u)" -ne 0 ]; then
  [ "${SBX_MUST_WORK:-0}" = 1 ] && { echo "openenv: needs root" >&2; exit 1; }
  echo "openenv: skipped (needs root)"; exit 77
fi
for mod in pytest websockets; do
  if ! /usr/bin/python3 -c "import $mod" 2>/dev/null; then
    [ "${SBX_MUST_WORK:-0}" = 1 ] && { echo "openenv: python3-$mod missing (scripts/deps.sh)" >&2; exit 1; }
    echo "openenv: skipped (python3-$mod missing; scripts/deps.sh installs it)"; exit 77
  fi
done
b=$SBX_BUILD_ROOT
src=$SBX_SOURCE_ROOT
export SBX_IMAGE_DIR=${SBX_TEST_TASK_IMAGE_DIR:-$b/test-task-images}
# shellcheck disable=SC1091
. "$src/examples/tasks/base-image.env"
(
  # One bootstrap at a time, whichever test gets here first.
  exec 9>"$b/.openenv-bootstrap.lock"
  flock 9
  if ! SBX_STATE_DIR="$b/test-state/openenv-bootstrap" "$b/src/cli/sbx" image inspect "$SBX_TASKS_IMAGE" >/dev/null 2>&1; then
    echo "openenv: bootstrapping the task base image (one time)" >&2
    SBX_STATE_DIR="$b/test-state/openenv-bootstrap" "$b/src/cli/sbx" image bootstrap "$SBX_TASKS_IMAGE" \
      --suite "$SBX_TASKS_SUITE" --include "$SBX_TASKS_PACKAGES" >&2
  fi
)
cd "$src/tests/openenv"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider -rs "$test_file"
