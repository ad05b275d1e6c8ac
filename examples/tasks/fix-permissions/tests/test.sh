#!/bin/bash
# Verifier for fix-permissions. Reward 1 only when every check passes; the
# number of passed checks goes to reward.json as extra metrics.
mkdir -p /logs/verifier
passed=0 total=0
check() { # description, command...
  local d=$1; shift
  total=$((total + 1))
  if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); echo "PASS $d"; else echo "FAIL $d"; fi
}
is() { [ "$(stat -c '%U:%G %a' "$1" 2>/dev/null)" = "$2 $3" ]; }

check "/srv/app root:app 750"            is /srv/app root:app 750
check "bin root:root 755"                is /srv/app/bin root:root 755
check "start.sh root:root 755"           is /srv/app/bin/start.sh root:root 755
check "backup.sh root:root 755"          is /srv/app/bin/backup.sh root:root 755
check "config root:app 750"              is /srv/app/config root:app 750
check "app.conf root:app 640"            is /srv/app/config/app.conf root:app 640
check "secrets.env app:app 600"          is /srv/app/config/secrets.env app:app 600
check "data app:app 2770"                is /srv/app/data app:app 2770
check "items.csv app:app 660"            is /srv/app/data/items.csv app:app 660
check "logs app:app 750"                 is /srv/app/logs app:app 750
check "helper removed"                   test ! -e /srv/app/bin/helper
check "no set-uid files"                 test -z "$(find /srv/app -perm -4000)"
check "nothing world-writable"           test -z "$(find /srv/app -perm -o+w ! -type l)"
check "contents unchanged"               sha256sum -c --quiet /tests/contents.sha256
check "guest cannot read secrets"        bash -c '! runuser -u guest -- cat /srv/app/config/secrets.env'
check "guest cannot write data"          bash -c '! runuser -u guest -- touch /srv/app/data/x'
rm -f /srv/app/data/heartbeat
check "start.sh runs as app"             runuser -u app -- /srv/app/bin/start.sh
check "heartbeat has group app"          bash -c '[ "$(stat -c %G /srv/app/data/heartbeat)" = app ]'

reward=0; [ $passed -eq $total ] && reward=1
printf '{"reward": %d, "checks_passed": %d, "checks_total": %d}\n' $reward $passed $total > /logs/verifier/reward.json
cat /logs/verifier/reward.json
