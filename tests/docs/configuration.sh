#!/usr/bin/env bash
# docs/configuration.md must be exactly `sbx help env --markdown`: the knob
# table of src/util/config.c is the source. After changing the table, run
#   build/src/cli/sbx help env --markdown > docs/configuration.md
set -euo pipefail
sbx=${1:?usage: configuration.sh SBX DOC}
doc=${2:?usage: configuration.sh SBX DOC}
if ! diff -u "$doc" <("$sbx" help env --markdown); then
  echo "docs/configuration.md differs from 'sbx help env --markdown' (regenerate it: see $0)" >&2
  exit 1
fi
