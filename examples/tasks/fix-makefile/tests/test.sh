#!/bin/bash
# Verifier for fix-makefile. Works on a copy of the project so that the
# checks do not depend on what the agent left in build/.
mkdir -p /logs/verifier
fail=0
ok()  { echo "PASS $1"; }
bad() { echo "FAIL $1"; fail=1; }

rm -rf /tmp/calc && cp -a /app/calc /tmp/calc && cd /tmp/calc && rm -rf build
cmp -s src/ops.c /tests/orig/ops.c && cmp -s src/main.c /tests/orig/main.c || echo "note: C sources were changed"
[ -f test ] && ok "file 'test' kept" || bad "the file named test was removed"

make -j4 >/tmp/m1.log 2>&1 && [ -x build/calc ] && ok "make -j4 from scratch" || { bad "make -j4 from scratch"; tail -5 /tmp/m1.log; }
[ "$(./build/calc 6 x 7 2>/dev/null)" = 42 ] && ok "calc works" || bad "build/calc 6 x 7 != 42"
make -q >/dev/null 2>&1 && ok "up to date after build" || bad "make -q says work remains after a build"

sleep 1.1
touch src/ops.h
make -q >/dev/null 2>&1 && bad "make -q ignores a change to src/ops.h" || ok "header change detected"
make >/tmp/m2.log 2>&1
for o in main ops; do
  [ build/$o.o -nt src/ops.h ] && ok "build/$o.o rebuilt" || bad "build/$o.o not rebuilt after touching src/ops.h"
done
sed -i 's/"1.2.0"/"9.9.9"/' src/ops.h && make >/dev/null 2>&1
[ "$(./build/calc --version 2>/dev/null)" = "calc 9.9.9" ] && ok "version change propagates" || bad "calc --version still old after editing ops.h"

out=$(make test 2>&1)
grep -q "tests passed" <<<"$out" && ok "make test runs" || { bad "make test"; echo "$out" | tail -3; }

rm -rf /tmp/stage
make install DESTDIR=/tmp/stage PREFIX=/usr >/tmp/m3.log 2>&1
[ -x /tmp/stage/usr/bin/calc ] && [ "$(stat -c %a /tmp/stage/usr/bin/calc)" = 755 ] && ok "install DESTDIR/PREFIX" \
  || { bad "make install DESTDIR=/tmp/stage PREFIX=/usr"; tail -3 /tmp/m3.log; }
rm -rf /tmp/stage2
make install DESTDIR=/tmp/stage2 >/dev/null 2>&1
[ -x /tmp/stage2/usr/local/bin/calc ] && ok "PREFIX default" || bad "PREFIX does not default to /usr/local"

before=$(find . -path ./build -prune -o -print | sort)
make clean >/dev/null 2>&1
[ ! -e build ] && ok "clean removes build/" || bad "build/ still there after make clean"
[ "$before" = "$(find . -print | sort)" ] && ok "clean removes nothing else" || bad "make clean removed other files"

echo $((1 - fail)) > /logs/verifier/reward.txt
