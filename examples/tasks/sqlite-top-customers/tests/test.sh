#!/bin/bash
# Verifier for sqlite-top-customers: runs /app/report.sql on the task database
# and on a hidden one, compares with a reference query.
mkdir -p /logs/verifier
rm -f /tmp/verify.db
sqlite3 /tmp/verify.db < /tests/verify-seed.sql
if python3 /tests/check_report.py /app/shop.db /tmp/verify.db; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
