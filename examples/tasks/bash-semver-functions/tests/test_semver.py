"""Hidden cases for /app/lib/semver.sh (path from $SEMVER_LIB)."""
import json, os, subprocess

LIB = os.environ.get("SEMVER_LIB", "/app/lib/semver.sh")


def sh(script):
    """Runs `source LIB; script` in a fresh bash; returns (status, stdout, stderr)."""
    r = subprocess.run(["bash", "-c", 'source "$0" || exit 99\n' + script, LIB],
                       capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout.strip(), r.stderr


def q(s):
    return "'" + s.replace("'", "'\\''") + "'"


cases = []  # (name, script, expected status, expected stdout)
for v in ["0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
          "1.0.0-x.7.z.92", "1.0.0-alpha+001", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
          "1.0.0-x-y-z.--", "1.0.0+21AF26D3----117B344092BD", "99999999999999999999.0.0"]:
    cases.append((f"valid {v}", f"semver_valid {q(v)}", 0, ""))
for v in ["", "1", "1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3+",
          "1.2.3-01", "1.2.3-alpha..1", "1.2.3+build..1", "1.2.3-alpha_beta", " 1.2.3", "1.2.3 ",
          "-1.2.3", "1.2.3-+b", "a.b.c"]:
    cases.append((f"invalid {v!r}", f"semver_valid {q(v)}", 1, ""))
# precedence chain from semver.org plus extras
chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
         "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0"]
for i in range(len(chain) - 1):
    a, b = chain[i], chain[i + 1]
    cases.append((f"{a} < {b}", f"semver_compare {a} {b}", 0, "-1"))
    cases.append((f"{b} > {a}", f"semver_compare {b} {a}", 0, "1"))
for a, b, want in [("1.0.0", "1.0.0", "0"), ("1.0.0+a", "1.0.0+b", "0"), ("1.0.0-rc.1+x", "1.0.0-rc.1", "0"),
                   ("2.0.0", "10.0.0", "-1"), ("1.0.0-2", "1.0.0-10", "-1"), ("1.0.0-a10", "1.0.0-a2", "-1"),
                   ("1.0.0-B", "1.0.0-a", "-1"), ("1.0.0-1", "1.0.0-a", "-1"),
                   ("18446744073709551616.0.0", "18446744073709551615.0.0", "1")]:
    cases.append((f"compare {a} {b}", f"semver_compare {a} {b}", 0, want))
for a, b in [("1.2", "1.2.3"), ("1.2.3", "v1.2.4"), ("x", "y")]:
    cases.append((f"compare invalid {a} {b}", f"semver_compare {a} {b}", 2, ""))
cases += [
    ("max basic", "semver_max 1.2.3 1.10.0 1.9.9", 0, "1.10.0"),
    ("max prerelease", "semver_max 2.0.0-rc.1 1.9.9 2.0.0-beta", 0, "2.0.0-rc.1"),
    ("max skips invalid", "semver_max junk 0.1.0 v9.9.9 ''", 0, "0.1.0"),
    ("max first of equals", "semver_max 1.0.0+b 1.0.0+a", 0, "1.0.0+b"),
    ("max none valid", "semver_max junk v1.0.0", 1, ""),
    ("max no args", "semver_max", 1, ""),
    ("bump patch", "semver_bump patch 1.2.3", 0, "1.2.4"),
    ("bump minor", "semver_bump minor 1.2.3", 0, "1.3.0"),
    ("bump major", "semver_bump major 1.2.3+build", 0, "2.0.0"),
    ("bump patch pre", "semver_bump patch 1.2.3-rc.1", 0, "1.2.3"),
    ("bump minor pre", "semver_bump minor 1.3.0-rc", 0, "1.3.0"),
    ("bump minor pre nonzero patch", "semver_bump minor 1.3.1-rc", 0, "1.4.0"),
    ("bump major pre", "semver_bump major 2.0.0-alpha", 0, "2.0.0"),
    ("bump major pre nonzero", "semver_bump major 2.1.0-alpha", 0, "3.0.0"),
    ("bump bad part", "semver_bump huge 1.2.3", 2, ""),
    ("bump bad version", "semver_bump patch 1.2", 2, ""),
    ("sourcing prints nothing", "true", 0, ""),
    ("no set -e leak", "semver_compare 1.0.0 2.0.0 >/dev/null; [[ $- != *e* ]] && echo ok", 0, "ok"),
    ("invalid does not exit caller", "semver_compare junk 1.0.0; echo after=$?", 0, "after=2"),
    ("no variable leaks",
     "before=$(compgen -v | sort); semver_compare 1.0.0-a.1 1.0.0-a.2 >/dev/null; semver_max 1.0.0 2.0.0 >/dev/null;"
     " semver_bump minor 1.2.3 >/dev/null; semver_valid 1.2.3; after=$(compgen -v | sort);"
     " [ \"$(comm -13 <(echo \"$before\") <(echo \"$after\") | grep -v -x -e before -e _ -e BASH_REMATCH)\" = '' ] && echo ok", 0, "ok"),
]

passed = 0
for name, script, want_rc, want_out in cases:
    try:
        rc, out, err = sh(script)
    except subprocess.TimeoutExpired:
        rc, out, err = -1, "", "timeout"
    good = rc == want_rc and out == want_out
    passed += good
    print(("PASS " if good else "FAIL ") + name + ("" if good else f": status {rc} (want {want_rc}), output {out!r} (want {want_out!r}) {err.strip()[:200]}"))
reward = {"reward": round(passed / len(cases), 4), "passed": passed, "total": len(cases)}
json.dump(reward, open("/logs/verifier/reward.json", "w"))
print(reward)
