#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Validates trajectory records (schema sbx.trajectory/1, docs/trajectories.md).

usage: check.py [--forbid STRING]... [--expect N] FILE.jsonl...
       check.py --self-test

Every non-empty line of every FILE must be one valid record. --forbid: the
raw text of a line must not contain STRING (a fake key in a test). --expect:
the files hold exactly N records together. Prints one line per problem
("FILE:LINE: field: what is wrong") and "trajectories: N records ok" on
success; exit status 0 ok, 1 a record is invalid, 2 bad arguments.
Debian's python3 standard library only.
"""
import json
import sys

SCHEMA = "sbx.trajectory/1"
STATUSES = {"Submitted", "TimeLimitExceeded", "AgentError", "VerifierError",
            "EnvironmentError"}
POLICY_END_REASONS = {"task_complete", "no_command", "max_turns", "length",
                      "timeout", "error"}
LIMITS = {None, "command", "agent", "episode"}
ROLES = {"system", "user", "assistant", "tool"}
STAGES = ("resolve", "create", "agent", "verify", "destroy", "total")
SECRETISH = ("key", "token", "secret", "passw", "auth", "cred", "header")
TOP = ("schema", "sbx_version", "run", "task", "task_dir", "sample", "agent",
       "model", "api_base", "settings", "provider", "sandbox_id", "image",
       "status", "scored", "reward", "rewards", "end_reason", "detail", "turns",
       "messages", "metrics", "agent_timed_out", "verifier", "seconds")


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def opt_str(v):
    return v is None or isinstance(v, str)


def check_turn(i, t, bad):
    p = "turns[%d]" % i
    if not isinstance(t, dict):
        return bad(p, "expected an object")
    if t.get("index") != i:
        bad(p + ".index", "expected %d, got %r" % (i, t.get("index")))
    if not isinstance(t.get("command"), str) or not t.get("command"):
        bad(p + ".command", "expected a non-empty string")
    if not (t.get("exit_code") is None or is_int(t.get("exit_code"))):
        bad(p + ".exit_code", "expected an integer or null")
    if not isinstance(t.get("output"), str):
        bad(p + ".output", "expected a string")
    elif t["output"] == "":
        bad(p + ".output", "empty: an empty observation is \"(no output)\"")
    for k in ("timed_out", "truncated"):
        if not isinstance(t.get(k), bool):
            bad(p + "." + k, "expected true or false")
    if t.get("limit") not in LIMITS:
        bad(p + ".limit", "expected null, command, agent or episode")
    for k in ("started", "seconds"):
        if not is_num(t.get(k)) or t.get(k) < 0:
            bad(p + "." + k, "expected seconds >= 0")
    if t.get("timed_out") is True and t.get("exit_code") is not None:
        bad(p + ".exit_code", "a timed-out command has no exit code (null)")


def check_message(i, m, bad):
    p = "messages[%d]" % i
    if not isinstance(m, dict):
        return bad(p, "expected an object")
    if m.get("role") not in ROLES:
        bad(p + ".role", "expected one of %s" % sorted(ROLES))
    c = m.get("content")
    if not (c is None or isinstance(c, (str, list))):
        bad(p + ".content", "expected a string, a list of parts or null")
    if m.get("role") != "assistant" and c is None:
        bad(p + ".content", "only an assistant message may have no content")


def check_record(r, bad):
    if not isinstance(r, dict):
        return bad("", "expected a JSON object")
    for k in TOP:
        if k not in r:
            bad(k, "missing")
    if r.get("schema") != SCHEMA:
        return bad("schema", "expected %r, got %r" % (SCHEMA, r.get("schema")))
    for k in ("sbx_version", "task", "agent", "provider"):
        if not isinstance(r.get(k), str) or not r.get(k):
            bad(k, "expected a non-empty string")
    if r.get("run") not in ("eval", "replay"):
        bad("run", "expected eval or replay")
    for k in ("task_dir", "model", "sandbox_id", "image", "detail", "end_reason"):
        if not opt_str(r.get(k)):
            bad(k, "expected a string or null")
    if not is_int(r.get("sample")) or r.get("sample") < 0:
        bad("sample", "expected an integer >= 0")
    base = r.get("api_base")
    if not opt_str(base):
        bad("api_base", "expected a string or null")
    elif base and ("?" in base or "@" in base.split("://", 1)[-1].split("/", 1)[0]):
        bad("api_base", "must not carry user:password@ or a query")
    s = r.get("settings")
    if not isinstance(s, dict):
        bad("settings", "expected an object")
    else:
        for k, v in s.items():
            if any(w in k.lower() for w in SECRETISH):
                bad("settings." + k, "a credential setting must not be recorded")
            if not isinstance(v, str):
                bad("settings." + k, "expected a string")
    if r.get("status") not in STATUSES:
        bad("status", "expected one of %s" % sorted(STATUSES))
    if not isinstance(r.get("scored"), bool):
        bad("scored", "expected true or false")
    rw = r.get("reward")
    if not (rw is None or is_num(rw)):
        bad("reward", "expected a number or null")
    if r.get("scored") is True and (r.get("status") != "Submitted" or not is_num(rw)):
        bad("scored", "a scored record is Submitted with a numeric reward")
    if not (r.get("rewards") is None or isinstance(r.get("rewards"), dict)):
        bad("rewards", "expected an object or null")
    if r.get("agent") == "policy" and r.get("end_reason") not in POLICY_END_REASONS | {None}:
        bad("end_reason", "expected one of %s" % sorted(POLICY_END_REASONS))
    turns = r.get("turns")
    if not isinstance(turns, list):
        bad("turns", "expected an array")
    else:
        for i, t in enumerate(turns):
            check_turn(i, t, bad)
    msgs = r.get("messages")
    if not isinstance(msgs, list):
        bad("messages", "expected an array")
    else:
        for i, m in enumerate(msgs):
            check_message(i, m, bad)
        if r.get("agent") == "policy" and r.get("status") != "EnvironmentError" and msgs:
            roles = [m.get("role") for m in msgs[:2] if isinstance(m, dict)]
            if roles != ["system", "user"]:
                bad("messages", "a policy episode starts with the system prompt and the "
                    "instruction (system, user), got %r" % roles)
    if not isinstance(r.get("metrics"), dict):
        bad("metrics", "expected an object")
    if not isinstance(r.get("agent_timed_out"), bool):
        bad("agent_timed_out", "expected true or false")
    v = r.get("verifier")
    if not isinstance(v, dict) or not isinstance(v.get("ran"), bool) or \
            not isinstance(v.get("timed_out"), bool) or \
            not (v.get("exit_code") is None or is_int(v.get("exit_code"))):
        bad("verifier", "expected {ran: bool, exit_code: int|null, timed_out: bool}")
    sec = r.get("seconds")
    if not isinstance(sec, dict):
        bad("seconds", "expected an object")
    else:
        for k in STAGES:
            if not is_num(sec.get(k)) or sec.get(k) < 0:
                bad("seconds." + k, "expected seconds >= 0")


def check_files(paths, forbid):
    problems, n = [], 0
    for path in paths:
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            problems.append("%s: %s" % (path, e.strerror))
            continue
        with f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                n += 1
                where = "%s:%d" % (path, lineno)
                for s in forbid:
                    if s in line:
                        problems.append("%s: contains a forbidden string (a key?)" % where)

                def bad(field, what, where=where):
                    problems.append("%s: %s%s%s" % (where, field, ": " if field else "", what))
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    bad("", "not JSON: %s" % e)
                    continue
                check_record(rec, bad)
    return n, problems


def self_test():
    good = {"schema": SCHEMA, "sbx_version": "0.1.0", "run": "eval", "task": "t",
            "task_dir": "/x/t", "sample": 0, "agent": "policy", "model": "m",
            "api_base": "http://127.0.0.1:1/v1", "settings": {"model": "m"},
            "provider": "local", "sandbox_id": "ab", "image": "img",
            "status": "Submitted", "scored": True, "reward": 1.0, "rewards": {"reward": 1},
            "end_reason": "task_complete", "detail": None,
            "turns": [{"index": 0, "command": "true", "exit_code": 0, "timed_out": False,
                       "limit": None, "output": "(no output)", "truncated": False,
                       "started": 0.1, "seconds": 0.01}],
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                         {"role": "assistant", "content": "```bash\ntrue\n```"}],
            "metrics": {}, "agent_timed_out": False,
            "verifier": {"ran": True, "exit_code": 0, "timed_out": False},
            "seconds": {k: 0.5 for k in STAGES}}
    errs = []
    check_record(good, lambda f, w: errs.append(f + ": " + w))
    assert not errs, errs
    breakers = [
        ("schema", "sbx.trajectory/0"), ("scored", True, "reward", None),
        ("settings", {"api_key_file": "/k"}), ("api_base", "http://u:p@h/v1"),
        ("end_reason", "bored"), ("sample", -1), ("status", "Done"),
        ("turns", [{"index": 1, "command": "", "exit_code": "0", "timed_out": 0,
                    "limit": "x", "output": "", "truncated": None, "started": -1,
                    "seconds": None}]),
        ("messages", [{"role": "user", "content": "u"}]), ("seconds", {}),
    ]
    for b in breakers:
        r = json.loads(json.dumps(good))
        for k, v in zip(b[::2], b[1::2]):
            r[k] = v
        errs = []
        check_record(r, lambda f, w: errs.append(f))
        assert errs, "not caught: %r" % (b,)
    r = dict(good)
    del r["turns"]
    errs = []
    check_record(r, lambda f, w: errs.append(f))
    assert "turns" in errs
    print("trajectories: self-test ok")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    forbid, expect, paths = [], None, []
    it = iter(argv)
    for a in it:
        if a == "--forbid":
            forbid.append(next(it, ""))
        elif a == "--expect":
            try:
                expect = int(next(it, ""))
            except ValueError:
                print("check.py: --expect: expected a count", file=sys.stderr)
                return 2
        elif a.startswith("-"):
            print("check.py: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths or "" in forbid:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    n, problems = check_files(paths, forbid)
    if expect is not None and n != expect:
        problems.append("expected %d records, found %d" % (expect, n))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("trajectories: %d records ok" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
