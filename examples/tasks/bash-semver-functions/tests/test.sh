#!/bin/bash
# Verifier for bash-semver-functions: score = fraction of cases passed,
# written to /logs/verifier/reward.json.
mkdir -p /logs/verifier
python3 /tests/test_semver.py
[ -s /logs/verifier/reward.json ] || echo '{"reward": 0.0}' > /logs/verifier/reward.json
