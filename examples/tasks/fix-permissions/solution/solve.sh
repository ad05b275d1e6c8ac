#!/bin/bash
# Oracle solution: remove the set-uid helper, then set owners and modes
# from the top down.
set -euo pipefail
cd /srv/app
rm -f bin/helper
chmod -R o-w .
chown root:app . config config/app.conf
chmod 750 . config
chmod 640 config/app.conf
chown -R root:root bin
chmod 755 bin bin/*.sh
chown app:app config/secrets.env
chmod 600 config/secrets.env
chown -R app:app data logs
chmod 2770 data
find data -type f -exec chmod 660 {} +
chmod 750 logs
find logs -type f -exec chmod 640 {} +
runuser -u app -- /srv/app/bin/start.sh
