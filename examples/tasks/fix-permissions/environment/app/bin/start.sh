#!/bin/sh
# Starts the (simulated) service: reads its config, writes a log line and a
# data file. Must be run as the user `app`.
set -eu
. /srv/app/config/secrets.env
grep -q '^listen=' /srv/app/config/app.conf
echo "$(date -u +%FT%TZ) started with token ${API_TOKEN%"${API_TOKEN#????}"}..." >> /srv/app/logs/app.log
echo "heartbeat" > /srv/app/data/heartbeat
echo "started"
