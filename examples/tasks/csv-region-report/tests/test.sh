#!/bin/bash
# Verifier for csv-region-report: exact comparison with the expected outputs.
# The image sets no WORKDIR, so this runs with cwd = / (every path is absolute).
mkdir -p /logs/verifier
fail=0
echo "cwd: $PWD"
for pair in "region_totals.tsv expected_totals.tsv" "rejected.csv expected_rejected.csv"; do
  set -- $pair
  if [ ! -f "/app/out/$1" ]; then
    echo "FAIL /app/out/$1 missing"; fail=1
  elif cmp -s "/app/out/$1" "/tests/$2"; then
    echo "PASS $1"
  else
    echo "FAIL $1 differs from the expected output:"; diff "/tests/$2" "/app/out/$1" | head -20; fail=1
  fi
done
(cd /app/data && sha256sum --quiet -c /tests/inputs.sha256) && echo "PASS inputs unchanged" || { echo "FAIL inputs changed"; fail=1; }
echo $((1 - fail)) > /logs/verifier/reward.txt
