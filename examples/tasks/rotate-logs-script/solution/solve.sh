#!/bin/bash
# Oracle solution: a bash implementation of rotate-logs.
set -euo pipefail
mkdir -p /app/bin
cat > /app/bin/rotate-logs <<'SH'
#!/bin/bash
# rotate-logs [-k KEEP] [-s MINSIZE] DIR: copytruncate rotation of DIR/*.log
set -u
usage() { echo "usage: rotate-logs [-k KEEP] [-s MINSIZE] DIR" >&2; exit 2; }
keep=3 minsize=1024
while getopts ':k:s:' opt; do
  case $opt in
    k) keep=$OPTARG ;;
    s) minsize=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
dir=$1
[[ $keep =~ ^[0-9]+$ ]] && [ "$((10#$keep))" -ge 1 ] || usage
[[ $minsize =~ ^[0-9]+$ ]] || usage
keep=$((10#$keep)) minsize=$((10#$minsize))
[ -d "$dir" ] || usage

export LC_ALL=C
shopt -s nullglob
for f in "$dir"/*.log; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  size=$(stat -c %s -- "$f")
  [ "$size" -ge "$minsize" ] || continue
  rm -f -- "$f.$keep"
  for ((i = keep - 1; i >= 1; i--)); do
    [ -e "$f.$i" ] && mv -f -- "$f.$i" "$f.$((i + 1))"
  done
  cp -p -- "$f" "$f.1"
  : > "$f"
  echo "rotated $(basename -- "$f") ($size bytes)"
done
exit 0
SH
chmod 755 /app/bin/rotate-logs
/app/bin/rotate-logs -s 1000 /app/logs
