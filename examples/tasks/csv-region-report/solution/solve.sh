#!/bin/bash
# Oracle solution: one awk pass over the exports, then sort.
set -euo pipefail
mkdir -p /app/out
cd /app/data
LC_ALL=C awk -F',' -v rej=/app/out/rejected.csv '
  { sub(/\r$/, "") }
  /^[[:space:]]*$/ || /^#/ || $1 == "date" { next }
  $4 !~ /^[0-9]+$/ { print > rej; next }
  {
    g = tolower($2); gsub(/[[:space:]]/, "", g)
    units[g] += $4; cents[g] += $4 * $5 * 100
    tu += $4; tc += $4 * $5 * 100
  }
  END {
    for (g in units) printf "%s\t%d\t%.2f\n", g, units[g], cents[g] / 100 | "sort -t \"\t\" -k3,3nr -k1,1"
    close("sort -t \"\t\" -k3,3nr -k1,1")
    printf "TOTAL\t%d\t%.2f\n", tu, tc / 100
  }' sales-2024-01.csv sales-2024-02.csv sales-2024-03.csv > /tmp/body.tsv
{ printf 'region\tunits\trevenue\n'; cat /tmp/body.tsv; } > /app/out/region_totals.tsv
cat /app/out/region_totals.tsv
