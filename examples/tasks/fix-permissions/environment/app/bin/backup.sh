#!/bin/sh
# Copies the data directory to /tmp/backup (run as app or root).
set -eu
mkdir -p /tmp/backup && cp -a /srv/app/data/. /tmp/backup/
