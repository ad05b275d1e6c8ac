#!/bin/bash
# Oracle solution: a regex validator and a field-by-field comparator.
set -euo pipefail
mkdir -p /app/lib
cat > /app/lib/semver.sh <<'SH'
# semver.sh: semantic version helpers (source this file).

# Succeeds when $1 is a valid semver 2.0.0 version (no leading "v").
semver_valid() {
	local n='(0|[1-9][0-9]*)'
	local p='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
	local b='[0-9A-Za-z-]+'
	local re="^$n\\.$n\\.$n(-$p(\\.$p)*)?(\\+$b(\\.$b)*)?\$"
	[[ ${1-} =~ $re ]]
}

# Compares two non-negative decimal integers of any length: prints -1, 0, 1.
_semver_cmp_num() {
	local a=$1 b=$2
	if ((${#a} != ${#b})); then
		((${#a} < ${#b})) && echo -1 || echo 1
	elif [[ $a == "$b" ]]; then
		echo 0
	elif [[ $a < $b ]]; then
		echo -1
	else
		echo 1
	fi
}

# Compares two prerelease identifiers.
_semver_cmp_id() {
	local a=$1 b=$2 an=0 bn=0
	[[ $a =~ ^[0-9]+$ ]] && an=1
	[[ $b =~ ^[0-9]+$ ]] && bn=1
	if ((an && bn)); then
		_semver_cmp_num "$a" "$b"
	elif ((an)); then
		echo -1
	elif ((bn)); then
		echo 1
	elif [[ $a == "$b" ]]; then
		echo 0
	else
		local LC_ALL=C
		if [[ $a < $b ]]; then echo -1; else echo 1; fi
	fi
}

semver_compare() {
	local a=${1-} b=${2-}
	semver_valid "$a" && semver_valid "$b" || return 2
	a=${a%%+*} b=${b%%+*}
	local acore=${a%%-*} bcore=${b%%-*} apre= bpre= i r
	[[ $a == *-* ]] && apre=${a#*-}
	[[ $b == *-* ]] && bpre=${b#*-}
	local -a x y
	IFS=. read -r -a x <<<"$acore"
	IFS=. read -r -a y <<<"$bcore"
	for i in 0 1 2; do
		r=$(_semver_cmp_num "${x[i]}" "${y[i]}")
		[[ $r != 0 ]] && { echo "$r"; return 0; }
	done
	if [[ -z $apre && -z $bpre ]]; then echo 0; return 0; fi
	[[ -z $apre ]] && { echo 1; return 0; }
	[[ -z $bpre ]] && { echo -1; return 0; }
	IFS=. read -r -a x <<<"$apre"
	IFS=. read -r -a y <<<"$bpre"
	for ((i = 0; i < ${#x[@]} && i < ${#y[@]}; i++)); do
		r=$(_semver_cmp_id "${x[i]}" "${y[i]}")
		[[ $r != 0 ]] && { echo "$r"; return 0; }
	done
	_semver_cmp_num "${#x[@]}" "${#y[@]}"
}

semver_max() {
	local best= v
	for v in "$@"; do
		semver_valid "$v" || continue
		if [[ -z $best || $(semver_compare "$v" "$best") == 1 ]]; then best=$v; fi
	done
	[[ -n $best ]] || return 1
	echo "$best"
}

semver_bump() {
	local part=${1-} v=${2-} core pre= M m p
	semver_valid "$v" || return 2
	v=${v%%+*}
	core=${v%%-*}
	[[ $v == *-* ]] && pre=${v#*-}
	IFS=. read -r M m p <<<"$core"
	case $part in
	major) if [[ -n $pre && $m == 0 && $p == 0 ]]; then echo "$M.0.0"; else echo "$((M + 1)).0.0"; fi ;;
	minor) if [[ -n $pre && $p == 0 ]]; then echo "$M.$m.0"; else echo "$M.$((m + 1)).0"; fi ;;
	patch) if [[ -n $pre ]]; then echo "$M.$m.$p"; else echo "$M.$m.$((p + 1))"; fi ;;
	*) return 2 ;;
	esac
}
SH
bash -c 'source /app/lib/semver.sh; semver_compare 1.0.0-alpha 1.0.0-alpha.1; semver_max 1.2.3 1.10.0 junk'
