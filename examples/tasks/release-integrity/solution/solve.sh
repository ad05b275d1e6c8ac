#!/bin/bash
# Oracle solution: sha256sum -c for the damage, comm for strays, tar to
# restore only what is broken, then fix modes from the backup listing.
set -euo pipefail
export LC_ALL=C
cd /app/release
sha256sum -c SHA256SUMS 2>/dev/null | awk -F': ' '$NF != "OK" {print $1}' | sort > /app/corrupted.txt || true
sed 's/^[0-9a-f]*  //' SHA256SUMS | sort > /tmp/listed
find . -type f ! -path ./SHA256SUMS | sed 's|^\./||' | sort > /tmp/present
comm -13 /tmp/listed /tmp/present > /app/stray.txt
cat /app/corrupted.txt /app/stray.txt
xargs -r -d '\n' rm -f -- < /app/stray.txt
if [ -s /app/corrupted.txt ]; then
  sed 's|^|./|' /app/corrupted.txt > /tmp/restore
  tar -xzpf "$BACKUP" -C /app/release -T /tmp/restore
fi
# permissions: compare every file's mode with the archive listing
tar -tvzf "$BACKUP" | awk '$1 ~ /^-/ {print $1, $NF}' | while read -r perms path; do
  mode=0
  for i in 1 2 3; do
    t=${perms:$((3 * i - 2)):3}; d=0
    [ "${t:0:1}" = r ] && d=$((d + 4)); [ "${t:1:1}" = w ] && d=$((d + 2)); [ "${t:2:1}" = x ] && d=$((d + 1))
    mode=$((mode * 8 + d))
  done
  want=$(printf '%o' "$mode")
  [ "$(stat -c %a "$path")" = "$want" ] || chmod "$want" "$path"
done
sha256sum -c --quiet SHA256SUMS && echo "release verified"
