#!/bin/bash
# Verifier for fix-c-build: compiles stats.c with the required flags, runs cases.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
fail=0
check() { # name expected actual
  if [ "$2" == "$3" ]; then echo "PASS $1"; else echo "FAIL $1"; echo "  expected: $2"; echo "  actual:   $3"; fail=1; fi
}

cd /app || { echo 0 > /logs/verifier/reward.txt; exit 0; }
if ! make >/dev/null 2>/tmp/make.err || [ ! -x /app/stats ]; then
  echo "FAIL make"; cat /tmp/make.err; fail=1
fi
grep -q -- '-Werror' Makefile || { echo "FAIL Makefile flags were weakened"; fail=1; }
bin=/tmp/stats-under-test
if ! gcc -std=c11 -Wall -Wextra -Werror -O2 -o "$bin" stats.c 2>/tmp/cc.err; then
  echo "FAIL compile with -Werror"; cat /tmp/cc.err; fail=1
else
  check odd "$(printf 'count=5\nmin=1\nmax=9\nmean=4.60\nmedian=4.00')" \
        "$(echo '9 1 4 7 2' | "$bin")"
  check even "$(printf 'count=4\nmin=-3\nmax=10\nmean=3.25\nmedian=3.00')" \
        "$(printf '10\n-3\n4\n2\n' | "$bin")"
  check single "$(printf 'count=1\nmin=42\nmax=42\nmean=42.00\nmedian=42.00')" \
        "$(echo 42 | "$bin")"
  check fraction-mean "$(printf 'count=3\nmin=1\nmax=2\nmean=1.33\nmedian=1.00')" \
        "$(echo '1 1 2' | "$bin")"
  # 5000 values: exercises realloc growth and the comparator on big numbers
  python3 - > /tmp/large.in 2> /tmp/large.want <<'PY'
import random, statistics, sys
r = random.Random(7)
v = [r.randint(-2_000_000_000, 2_000_000_000) for _ in range(5000)]
print("\n".join(map(str, v)))
m = statistics.median(v)
sys.stderr.write(f"count={len(v)}\nmin={min(v)}\nmax={max(v)}\nmean={sum(v)/len(v):.2f}\nmedian={m:.2f}")
PY
  check large "$(cat /tmp/large.want)" "$("$bin" < /tmp/large.in)"
  out=$(printf '' | "$bin" 2>/tmp/err.txt); rc=$?
  check empty-status 1 "$rc"
  check empty-stderr "error: no input" "$(cat /tmp/err.txt)"
  check empty-stdout "" "$out"
fi
if [ $fail -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
