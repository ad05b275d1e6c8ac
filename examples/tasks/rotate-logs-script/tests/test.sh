#!/bin/bash
# Verifier for rotate-logs-script: runs the Python checks, reward 1 iff all pass.
mkdir -p /logs/verifier
if python3 /tests/test_rotate.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
