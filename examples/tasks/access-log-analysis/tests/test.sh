#!/bin/bash
# Verifier for access-log-analysis: one point per correct answer, written to
# /logs/verifier/reward.json as {"reward": <fraction>, "<key>": 0|1, ...}.
mkdir -p /logs/verifier
python3 - <<'PY'
import json

want = json.load(open("/tests/expected.json"))
try:
    got = json.load(open("/app/answers.json"))
    if not isinstance(got, dict):
        raise ValueError("not a JSON object")
except Exception as e:  # missing or malformed answers: every check fails
    print(f"FAIL reading /app/answers.json: {e}")
    got = {}

def same(key):
    g, w = got.get(key), want[key]
    if isinstance(w, float):
        return isinstance(g, (int, float)) and not isinstance(g, bool) and abs(g - w) < 5e-5
    if isinstance(w, int):
        return isinstance(g, int) and not isinstance(g, bool) and g == w
    return g == w

scores = {}
for key in ("unique_ips", "top_path", "server_error_rate", "busiest_hour"):
    scores[key] = 1 if same(key) else 0
    print(("PASS " if scores[key] else "FAIL ") + f"{key}: got {got.get(key)!r}")
reward = {"reward": sum(scores.values()) / len(scores), **scores}
json.dump(reward, open("/logs/verifier/reward.json", "w"))
print(reward)
PY
