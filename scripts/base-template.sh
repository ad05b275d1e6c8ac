#!/usr/bin/env bash
# `make base`: the image `sbx serve` serves as E2B's templateID "base"
# (examples/templates/base: Debian bookworm, user `user` with passwordless
# sudo, git, curl, python3 + pip, ...), in $SBX_IMAGE_DIR (default store
# /var/lib/sbx/images). Skips what is present:
#  1. bootstraps the task base image (examples/tasks/base-image.env) from this
#     machine's apt mirror when the store lacks it (one time, a few minutes);
#  2. builds examples/templates/base FROM it and names the result `base`
#     (about 40 s: apt installs what the task image lacks).
#   scripts/base-template.sh [--update] [BUILD_DIR] [NAME]
# --update builds even when NAME exists (a cache hit unless the Dockerfile or
# the task image changed): the tests use it so that a store kept between runs
# never serves a stale `base`.
set -euo pipefail
update=0
if [ "${1:-}" = --update ]; then update=1; shift; fi
build=${1:-build}
name=${2:-base}
sbx="$build/src/cli/sbx"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../examples/tasks/base-image.env
. "$here/examples/tasks/base-image.env"

if [ "$(id -u)" -ne 0 ]; then
  echo "base: building images needs root (namespaces, overlayfs): run 'sudo make base'" >&2
  exit 4
fi
if [ "$update" = 0 ] && "$sbx" image inspect "$name" >/dev/null 2>&1; then
  echo "base: the image '$name' is present (remove it with '$sbx image rm $name' to rebuild)"
  exit 0
fi
if ! "$sbx" image inspect "$SBX_TASKS_IMAGE" >/dev/null 2>&1; then
  echo "base: bootstrapping $SBX_TASKS_IMAGE with debootstrap (+ $SBX_TASKS_PACKAGES; one time, a few minutes)..."
  "$sbx" image bootstrap "$SBX_TASKS_IMAGE" --suite "$SBX_TASKS_SUITE" --include "$SBX_TASKS_PACKAGES"
fi
echo "base: sbx build examples/templates/base -t $name (E2B's base image; about a minute)"
"$sbx" build --build-arg "BASE_IMAGE=$SBX_TASKS_IMAGE" -t "$name" "$here/examples/templates/base"
