#!/bin/bash
# Verifier for release-integrity.
mkdir -p /logs/verifier
export LC_ALL=C
fail=0
ok()  { echo "PASS $1"; }
bad() { echo "FAIL $1"; fail=1; }

printf '%s\n' bin/tool4 etc/tools.conf lib/libpart3.so.txt lib/libpart7.so.txt > /tmp/want-corrupted
printf '%s\n' lib/libpart9.so.txt > /tmp/want-stray
cmp -s /tmp/want-corrupted /app/corrupted.txt && ok "corrupted.txt" || { bad "corrupted.txt"; diff /tmp/want-corrupted /app/corrupted.txt; }
cmp -s /tmp/want-stray /app/stray.txt && ok "stray.txt" || { bad "stray.txt"; diff /tmp/want-stray /app/stray.txt; }

cd /app/release || exit 0
sha256sum -c --quiet SHA256SUMS && ok "checksums" || bad "sha256sum -c SHA256SUMS"
[ -f /app/backup/release-1.4.2.tar.gz ] && ok "backup kept" || bad "backup archive missing"

# compare every file's mode and mtime with a fresh extraction of the backup
rm -rf /tmp/pristine && mkdir /tmp/pristine && tar -xzpf /app/backup/release-1.4.2.tar.gz -C /tmp/pristine 2>/dev/null
(cd /tmp/pristine && find . -type f -printf '%p %m %T@\n' | sort) > /tmp/want-meta
find . -type f -printf '%p %m %T@\n' | sort > /tmp/got-meta
cmp -s /tmp/want-meta /tmp/got-meta && ok "file list, modes and mtimes" || { bad "file list, modes or mtimes differ from the backup"; diff /tmp/want-meta /tmp/got-meta | head; }

echo $((1 - fail)) > /logs/verifier/reward.txt
