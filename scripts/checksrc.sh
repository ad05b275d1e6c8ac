#!/usr/bin/env bash
# Style gate: banned functions, raw allocation outside util/alloc.c, file size
# cap, exported-symbol prefix. Prints each offence and fails if any.
set -uo pipefail
cd "$(dirname "$0")/.."
bad=0
banned='\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|strtok|system|popen)[[:space:]]*\('
while IFS= read -r f; do
  if grep -nE "$banned" "$f" | grep -v 'checksrc: allow'; then echo "  ^ banned function in $f"; bad=1; fi
  if grep -nE '(^|[^_a-z])signal[[:space:]]*\(' "$f" | grep -v 'checksrc: allow'; then echo "  ^ use sigaction, not signal(), in $f"; bad=1; fi
  case "$f" in
    src/util/alloc.c|src/providers/local/init/*) ;;
    *) if grep -nE '(^|[^_a-z])(malloc|realloc)[[:space:]]*\(' "$f" | grep -v 'checksrc: allow'; then
         echo "  ^ raw malloc/realloc outside util/alloc.c in $f"; bad=1; fi ;;
  esac
  # The environment is read through the knob table (src/util/config.h).
  # init/, sudo/: static binaries run in the sandbox; they do not link libsbx
  # (sudo/ reads the environment of the sandbox user who runs it).
  case "$f" in
    src/util/config.[ch]|src/providers/local/init/*|src/providers/local/sudo/*) ;;
    *) if grep -nE '(^|[^_a-z])(secure_)?getenv[[:space:]]*\(' "$f" | grep -v 'checksrc: allow'; then
         echo "  ^ raw getenv in $f: use sbx__env (src/util/config.h) and add the knob to src/util/config.c"; bad=1; fi ;;
  esac
  # sbx-init unmaps its vDSO once set up (init/main.c): a libc clock call
  # made before would leave musl a pointer into it. init reads clocks with
  # syscall(SYS_clock_gettime).
  case "$f" in
    src/providers/local/init/*|src/providers/local/proto.c)
      if grep -nE '(^|[^_a-zA-Z])(time|clock_gettime|gettimeofday|clock|sched_getcpu|getcpu|mkstemp|mkostemp|mkdtemp|mkstemps|mktemp|tmpfile|tmpnam|tempnam|localtime|gmtime|strftime|timespec_get|ftime|syslog|getaddrinfo|gethostbyname|res_query|sem_timedwait|pthread_cond_timedwait|pthread_mutex_timedlock|pthread_timedjoin_np|mtx_timedlock|cnd_timedwait|nanosleep_until)[[:space:]]*\(' "$f" | grep -v 'checksrc: allow'; then
        echo "  ^ a libc clock call in sbx-init ($f): it has no vDSO once idle; use syscall(SYS_clock_gettime, ...)"; bad=1
      fi ;;
  esac
  n=$(wc -l < "$f")
  if [ "$n" -gt 1500 ]; then echo "$f: $n lines (cap 1500)"; bad=1; fi
done < <(git ls-files 'src/*.c' 'src/*.h' 2>/dev/null || find src -name '*.[ch]')
# Every knob src/ names (an sbx__env("X") argument, or a literal "SBX_...",
# "OPENENV_...", "E2B_...", "DAYTONA_...", "MODAL_..." in a list of names)
# is in the table's K(...) part, which `sbx help env` and docs/configuration.md print.
knobs=$(grep -oE '^[[:space:]]*K\("[A-Z0-9_]+"' src/util/config.c | grep -oE '[A-Z0-9_]+' | sort -u)
named=$( (git ls-files 'src/*.c' 'src/*.h' 2>/dev/null || find src -name '*.[ch]') | grep -v '^src/util/config\.c$' |
  xargs grep -ohE 'sbx__env\("[A-Za-z0-9_]+"\)|"(SBX|OPENENV|E2B|DAYTONA|MODAL)_[A-Z0-9_]+"' |
  grep -oE '"[A-Za-z0-9_]+"' | tr -d '"' | sort -u)
missing=$(comm -13 <(echo "$knobs") <(echo "$named"))
if [ -n "$missing" ]; then
  echo "environment variables named in src/ but not in the knob table (src/util/config.c):"; echo "$missing"; bad=1
fi
lib=$(ls build/libsbx.so* 2>/dev/null | head -n1)
if [ -n "$lib" ]; then
  extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -vE '^sbx_[a-z0-9]+_[a-z0-9_]+$|^_init$|^_fini$|^sbx_[a-z]+$' || true)
  if [ -n "$extra" ]; then echo "exported symbols without the sbx_ prefix:"; echo "$extra"; bad=1; fi
fi
# The provider is the unit of extension (docs/adding-a-provider.md): outside
# src/providers/, no C source names a backend or includes a provider's header.
# The registry (src/core/registry.c) lists providers by their ops symbols.
backends='"(e2b|agentenv|daytona|modal|local)"|#[[:space:]]*include[[:space:]]*["<][^">]*providers/'
leaks=$( (git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 2>/dev/null || find src include -name '*.[ch]') |
  grep -v '^src/providers/' | xargs grep -nE "$backends" | grep -v 'checksrc: allow' || true)
if [ -n "$leaks" ]; then echo "$leaks"; echo "  ^ a backend named outside src/providers/ (ask the registry)"; bad=1; fi
[ "$bad" -eq 0 ] && echo "checksrc: ok"
exit $bad
