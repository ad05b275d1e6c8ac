#!/bin/bash
# Verifier for jq-team-directory: checks teams.json and runs transform.sh on a
# hidden export, comparing with a Python reference.
mkdir -p /logs/verifier
python3 - <<'PY'
import json, subprocess

def reference(users):
    out = {}
    for u in users:
        if u.get("active") is not True:
            continue
        t = out.setdefault(u["team"] if u["team"] is not None else "unassigned",
                           {"count": 0, "members": [], "admins": [], "logins": []})
        t["count"] += 1
        t["members"].append(u["name"])
        if "admin" in (u.get("roles") or []):
            t["admins"].append(u["email"])
        if u.get("last_login"):
            t["logins"].append(u["last_login"])
    return {k: {"count": v["count"], "members": sorted(v["members"]), "admins": sorted(v["admins"]),
                "last_login": max(v["logins"]) if v["logins"] else None} for k, v in out.items()}

ok = True
def report(name, good, detail=""):
    global ok
    ok = ok and good
    print(("PASS " if good else "FAIL ") + name + (f": {detail}" if detail and not good else ""))

given = json.load(open("/app/input/users.json"))
try:
    report("teams.json", json.load(open("/app/output/teams.json")) == reference(given), "content differs")
except Exception as e:
    report("teams.json", False, str(e))
for name, path in (("transform.sh on the export", "/app/input/users.json"),
                   ("transform.sh on a hidden export", "/tests/hidden-users.json")):
    try:
        r = subprocess.run(["/app/transform.sh"], stdin=open(path), capture_output=True, text=True, timeout=30)
        got = json.loads(r.stdout)
        report(name, r.returncode == 0 and got == reference(json.load(open(path))),
               f"exit {r.returncode}, output differs")
    except Exception as e:
        report(name, False, str(e))
open("/logs/verifier/reward.txt", "w").write("1\n" if ok else "0\n")
PY
