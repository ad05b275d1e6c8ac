#!/usr/bin/env bash
# `make demo`: the main job on the local backend.
#  1. bootstraps the task base image (sbx-tasks:bookworm: Debian minbase plus
#     the tools the bundled tasks use) from this machine's apt mirror, once;
#  2. shows one sandbox: run, then create/exec/ls/rm;
#  3. bakes the template image of every task in examples/tasks (cached after
#     the first run: a second run rebuilds 0 layers);
#  4. runs every task's golden (oracle) episode: each must get reward 1.
# After step 1 it builds the image `base` (E2B's base image,
# scripts/base-template.sh; skipped when present), so that `sbx serve` with no
# flags answers the E2B SDK's Sandbox.create().
set -euo pipefail
build=${1:-build}
sbx="$build/src/cli/sbx"
tasks=${SBX_DEMO_TASKS:-examples/tasks}
# shellcheck source=../examples/tasks/base-image.env
. "$tasks/base-image.env"
image=$SBX_TASKS_IMAGE

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: the local provider needs root (namespaces, overlayfs, cgroups)" >&2
  exit 4
fi

# An image from an older package list lacks tools: check, and rebuild if so.
if "$sbx" image inspect "$image" >/dev/null 2>&1 &&
   ! "$sbx" run "$image" -- dpkg-query -W ${SBX_TASKS_PACKAGES//,/ } >/dev/null 2>&1; then
  echo "demo: $image lacks some of $SBX_TASKS_PACKAGES; bootstrapping it again"
  "$sbx" image rm "$image" >/dev/null
fi
if ! "$sbx" image inspect "$image" >/dev/null 2>&1; then
  echo "demo: bootstrapping $image with debootstrap (+ $SBX_TASKS_PACKAGES; one time, a few minutes)..."
  "$sbx" image bootstrap "$image" --suite "$SBX_TASKS_SUITE" --include "$SBX_TASKS_PACKAGES"
fi

echo "demo: the E2B template 'base' for sbx serve (make base; skipped when present)"
bash scripts/base-template.sh "$build"

echo "demo: sbx run $image (create -> exec -> destroy)"
"$sbx" run --time "$image" -- sh -c '
  echo "  hello from $(hostname): Debian $(cat /etc/debian_version), $(nproc) cpus visible"
  echo "  whoami=$(whoami) pid1=$(cat /proc/1/comm) network: $(ls /sys/class/net | tr "\n" " ")(loopback only)"'

echo "demo: a sandbox that outlives one command"
id=$("$sbx" create --memory 512M --label demo=1 "$image")
"$sbx" exec "$id" -- sh -c 'echo data > /tmp/x'
"$sbx" exec "$id" -- cat /tmp/x | sed 's/^/  kept between execs: /'
"$sbx" rm "$id" >/dev/null

echo "demo: sbx bake $tasks --all (template images; cached after the first run)"
"$sbx" bake "$tasks" --all

echo "demo: sbx golden $tasks --all (oracle solution, then the verifier; every task must pass)"
"$sbx" golden "$tasks" --all
echo "demo: left over: $("$sbx" ls --json | grep -c '"id"' || true) sandboxes"
echo "demo: now 'sudo $sbx serve' and the E2B SDK's Sandbox.create() work (docs/server.md)"
