#!/bin/bash
# Oracle solution: awk over the access log, jq to assemble the answers.
set -euo pipefail
log=/var/log/nginx/access.log
export LC_ALL=C
unique_ips=$(awk '{print $1}' "$log" | sort -u | wc -l)
top_path=$(awk '$9 == 200 {p = $7; sub(/\?.*/, "", p); n[p]++}
  END {for (p in n) print n[p], p}' "$log" | sort -k1,1nr -k2,2 | awk 'NR == 1 {print $2}')
server_error_rate=$(awk '{t++} $9 ~ /^5[0-9][0-9]$/ {e++} END {printf "%.4f", e / t}' "$log")
busiest_hour=$(awk '{
    split(substr($4, 2), a, /[\/:]/)   # 01 May 2024 13 ...
    m = index("JanFebMarAprMayJunJulAugSepOctNovDec", a[2]); m = (m + 2) / 3
    printf "%s-%02d-%sT%s\n", a[3], m, a[1], a[4]
  }' "$log" | sort | uniq -c | sort -k1,1nr -k2,2 | awk 'NR == 1 {print $2}')
jq -n --argjson u "$unique_ips" --arg p "$top_path" --argjson r "$server_error_rate" --arg h "$busiest_hour" \
  '{unique_ips: $u, top_path: $p, server_error_rate: $r, busiest_hour: $h}' > /app/answers.json
cat /app/answers.json
