#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harnesses of tests/fuzz/ with clang,
# ASan and UBSan in build-fuzz/ and runs each for FUZZ_MINUTES minutes, one
# after another on one core (nice 15). New inputs that add coverage are
# merged (minimized) into tests/fuzz/corpus/<name>/; crashes are kept under
# build-fuzz/crashes/<name>/. Prints executions, exec/s and crashes per
# harness. See docs/fuzzing.md.
#   scripts/fuzz.sh [HARNESS...]        default: all
#   FUZZ_MINUTES=5  FUZZ_RUNS=N (also stop after N executions)
#   FUZZ_MERGE=0    do not merge new inputs into the committed corpus
#   FUZZ_NOBUILD=1  run the harnesses as built (no ninja)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
minutes=${FUZZ_MINUTES:-5}
runs=${FUZZ_RUNS:-}
merge=${FUZZ_MERGE:-1}
all=(toml dockerfile image_config tar http multipart connect openenv_ws)
[ $# -gt 0 ] && harnesses=("$@") || harnesses=("${all[@]}")

if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true -Dwerror=false \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer -Wno-error -Wno-format-nonliteral' \
    >/dev/null || { echo "fuzz: meson setup of $build failed (needs clang and libclang-rt-dev)"; exit 1; }
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("tests/fuzz/fuzz-$h"); done
if [ "${FUZZ_NOBUILD:-0}" != 1 ]; then
  nice -n 15 ninja -C "$build" "${targets[@]}" >/dev/null || { echo "fuzz: build failed"; exit 1; }
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_odr_violation=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
summary=()
for h in "${harnesses[@]}"; do
  exe="$build/tests/fuzz/fuzz-$h"
  corpus=tests/fuzz/corpus/$h
  work="$build/work/$h"
  crashes="$build/crashes/$h"
  mkdir -p "$work" "$crashes"
  log="$build/fuzz-$h.log"
  limit=(-max_total_time=$((minutes * 60)))
  [ -n "$runs" ] && limit+=(-runs="$runs")
  # Fuzz into a scratch corpus seeded from the committed one.
  nice -n 15 "$exe" "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$corpus" >"$log" 2>&1
  frc=$?
  execs=$(grep -a 'stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2}')
  speed=$(grep -a 'stat::average_exec_per_sec' "$log" | tail -1 | awk '{print $2}')
  found=$(find "$crashes" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  added=0
  if [ "$merge" = 1 ]; then
    # Minimize what was found against the committed corpus (edges only, no
    # hit counters, for a small set), then commit at
    # most FUZZ_KEEP of the new inputs (smallest first) so it stays small.
    merged="$build/merged/$h"
    rm -rf "$merged" && mkdir -p "$merged"
    cp "$corpus"/* "$merged"/ 2>/dev/null
    nice -n 15 "$exe" -merge=1 -use_counters=0 -max_len=8192 -timeout=10 "$merged" "$work" >>"$log" 2>&1 || true
    while IFS= read -r f; do
      [ "$added" -ge "${FUZZ_KEEP:-40}" ] && break
      [ -e "$corpus/$(basename "$f")" ] && continue
      cp "$f" "$corpus"/ && added=$((added + 1))
    done < <(find "$merged" -type f -size -8k -printf '%s %p\n' | sort -n | cut -d' ' -f2-)
  fi
  [ "$frc" -ne 0 ] && rc=1
  summary+=("$(printf '%-13s executions %-11s exec/s %-7s crashes %s, corpus +%s (exit %s)' "$h" "${execs:-?}" "${speed:-?}" "$found" "$added" "$frc")")
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $rc
