#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A scripted OpenAI-compatible chat-completions server: a FAKE for the tests.

A real model API is a cloud service unreachable from CI, so the policy agent
and `sbx eval` are tested against this server on loopback. It speaks
POST /v1/chat/completions (and /chat/completions): plain JSON answers and
SSE (`"stream": true`), text replies and `tools` calls. Standard library
only; run it with Debian's /usr/bin/python3.

Usage: openai_server.py [--tasks-dir DIR] [--port-file FILE] [--record FILE]
                        [--slow-seconds S] [--script FILE]
It listens on 127.0.0.1, port 0, and prints "PORT <n>" on stdout (and writes
<n> to --port-file). The model name of each request picks the behaviour:

  replay (alias scripted)  the task whose instruction.md is the first user
                     turn is found in --tasks-dir; its solution/solve.sh (with
                     its [solution.env]) comes back in a ```bash block, then
                     TASK_COMPLETE. With `tools` in the request: a bash call.
  length             a ```bash block creating /tmp/length-marker, cut:
                     finish_reason "length"
  no_command         an empty reply
  rate_limit_then_ok the first request of a conversation gets 429
                     (Retry-After: 0), then as replay
  always_500         HTTP 500, always
  slow               sleeps --slow-seconds (default 30), then as replay
  big_output         a command printing 1 MiB, then TASK_COMPLETE
  fences             text, ```text, then two ```bash blocks (the first must
                     run), then a turn showing what ran, then TASK_COMPLETE
  python             a ```python block, then TASK_COMPLETE
  forever            `echo turn N` every turn (the turn limit ends it)
  env                a command printing the sandbox's environment and processes
  garbage            HTTP 200 whose body is not JSON (nor SSE)
  tool_bad           a call of an unknown tool, then TASK_COMPLETE
  bad_request        HTTP 400, always (not to be retried)
  script             the replies of --script FILE: a JSON list of assistant
                     messages (with an optional "finish_reason"), by turn

Every assistant message also carries `reasoning_content` and an
`x_fake_turn` field, so a client that echoes messages verbatim can be
checked. Every request is appended to --record as one JSON line: the path,
the body and, for the Authorization header, only whether it came and its
SHA-256 (the key itself is never written anywhere).
"""

import argparse
import hashlib
import json
import os
import sys
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
SEEN = {}  # (behaviour, conversation) -> requests so far, for rate_limit_then_ok


def first_user(messages):
    for m in messages:
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c)
    return ""


def find_task(instruction):
    d = ARGS.tasks_dir
    if not d:
        return None
    want = instruction.strip()
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name, "instruction.md")
        try:
            with open(p, encoding="utf-8") as f:
                if f.read().strip() == want:
                    return os.path.join(d, name)
        except OSError:
            continue
    return None


def solution_command(task):
    with open(os.path.join(task, "solution", "solve.sh"), encoding="utf-8") as f:
        script = f.read()
    env = {}
    try:
        with open(os.path.join(task, "task.toml"), "rb") as f:
            env = tomllib.load(f).get("solution", {}).get("env", {})
    except (OSError, tomllib.TOMLDecodeError):
        pass
    exports = "".join(f"export {k}='{v}'\n" for k, v in env.items())
    first = script.splitlines()[0] if script else ""
    interp = "bash" if first.startswith("#!") and "bash" in first else "sh"
    tag = "SOLVE_EOF"
    while tag in script:
        tag += "_"
    return (f"cat > /tmp/solve.sh <<'{tag}'\n{script}\n{tag}\n"
            f"{exports}DEBIAN_FRONTEND=noninteractive {interp} /tmp/solve.sh")


def text(content, finish="stop"):
    return {"role": "assistant", "content": content}, finish


def fence(cmd, lang="bash"):
    return f"```{lang}\n{cmd}\n```"


def tool_call(n, name, args):
    msg = {"role": "assistant", "content": None,
           "tool_calls": [{"id": f"call_{n}", "type": "function",
                           "function": {"name": name, "arguments": json.dumps(args)}}]}
    return msg, "tool_calls"


def replay(body, n):
    """(message, finish_reason) or (status, error text)."""
    msgs = body.get("messages", [])
    if n > 0:
        return text("TASK_COMPLETE")
    task = find_task(first_user(msgs))
    if not task:
        return 400, "no task in --tasks-dir has this instruction"
    cmd = solution_command(task)
    if body.get("tools"):
        return tool_call(n, "bash", {"command": cmd})
    return text(fence(cmd))


def behave(model, body, n, conv):
    if model in ("replay", "scripted"):
        return replay(body, n)
    if model == "length":
        if n == 0:
            return text("I will create the marker:\n```bash\ntouch /tmp/length-marker\n```\n"
                        "and then", "length")
        return text("TASK_COMPLETE")
    if model == "no_command":
        return text("")
    if model == "rate_limit_then_ok":
        with LOCK:
            k = (model, conv, n)
            SEEN[k] = SEEN.get(k, 0) + 1
            first = SEEN[k] == 1
        if first:
            return 429, "rate limited (fake)"
        return replay(body, n)
    if model == "always_500":
        return 500, "internal error (fake)"
    if model == "bad_request":
        return 400, "bad request (fake)"
    if model == "slow":
        time.sleep(ARGS.slow_seconds)
        return replay(body, n)
    if model == "big_output":
        if n == 0:
            return text(fence("head -c 1048576 /dev/zero | tr '\\0' x"))
        return text("TASK_COMPLETE")
    if model == "fences":
        if n == 0:
            return text("Plan:\n```text\necho not-this > /tmp/fence\n```\nNow:\n"
                        + fence("echo first > /tmp/fence") + "\nor\n"
                        + fence("echo second > /tmp/fence") + "\n")
        if n == 1:
            return text(fence("cat /tmp/fence", "sh"))
        return text("TASK_COMPLETE")
    if model == "python":
        if n == 0:
            return text(fence("import sys\nprint('py', 6 * 7)\nsys.exit(3)", "python"))
        return text("TASK_COMPLETE")
    if model == "forever":
        return text(fence(f"echo turn {n}"))
    if model == "env":
        if n == 0:
            return text(fence("env; tr '\\0' '\\n' < /proc/1/environ; ps -ef 2>/dev/null"))
        return text("TASK_COMPLETE")
    if model == "tool_bad":
        if n == 0:
            return tool_call(n, "python", {"code": "print(1)"})
        return text("TASK_COMPLETE")
    if model == "script" and ARGS.script:
        with open(ARGS.script, encoding="utf-8") as f:
            replies = json.load(f)
        m = dict(replies[min(n, len(replies) - 1)])
        finish = m.pop("finish_reason", "stop")
        m.setdefault("role", "assistant")
        return m, finish
    return 400, f"unknown fake model {model!r}"


def record(handler, body):
    if not ARGS.record:
        return
    auth = handler.headers.get("Authorization")
    line = {"path": handler.path, "body": body, "authorization": auth is not None,
            "authorization_sha256": hashlib.sha256(auth.encode()).hexdigest() if auth else None}
    with LOCK, open(ARGS.record, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def sse_chunks(msg, finish, model):
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta, fr=None):
        return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": fr}])

    out = [chunk({"role": "assistant", "content": ""})]
    for k, v in msg.items():
        if k in ("role", "tool_calls") or v is None:
            continue
        if isinstance(v, str):
            third = max(1, len(v) // 3)
            for i in range(0, len(v), third):
                out.append(chunk({k: v[i:i + third]}))
        else:
            out.append(chunk({k: v}))
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc["function"]
        a = fn["arguments"]
        out.append(chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": a[:5]}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": a[5:]}}]}))
    out.append(chunk({}, finish))
    out.append(dict(base, choices=[], usage={"prompt_tokens": 10, "completion_tokens": 5,
                                             "total_tokens": 15}))
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # quiet: the tests read their own output
        pass

    def send_json(self, status, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": []})
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            self.send_json(400, {"error": {"message": "the body is not JSON"}})
            return
        record(self, body)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = body.get("model", "")
        msgs = body.get("messages", [])
        n_turn = sum(1 for m in msgs if m.get("role") == "assistant")
        conv = hashlib.sha256(first_user(msgs).encode()).hexdigest()
        try:
            res = behave(model, body, n_turn, conv)
        except (OSError, ValueError, KeyError) as e:
            res = (500, f"fake server error: {e}")
        if model == "garbage":
            data = b"data: this is not json\n\n" if body.get("stream") else b"<html>oops</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if body.get("stream")
                             else "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if isinstance(res[0], int):
            status, msg = res
            hdrs = [("Retry-After", "0")] if status == 429 else []
            self.send_json(status, {"error": {"message": msg, "type": "fake"}}, hdrs)
            return
        msg, finish = res
        msg = dict(msg)
        msg.setdefault("reasoning_content", f"fake reasoning for turn {n_turn}")
        msg.setdefault("x_fake_turn", {"n": n_turn, "model": model})
        try:
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for c in sse_chunks(msg, finish, model):
                    self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True
                return
            self.send_json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": msg, "finish_reason": finish,
                             "logprobs": None}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): nothing to answer


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks-dir")
    p.add_argument("--port-file")
    p.add_argument("--record")
    p.add_argument("--script")
    p.add_argument("--slow-seconds", type=float, default=30.0)
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{port}\n")
        os.rename(tmp, ARGS.port_file)
    print(f"PORT {port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
