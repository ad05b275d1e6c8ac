# SPDX-License-Identifier: MIT
"""The OpenEnv protocol of `sbx openenv serve`: HTTP routes, WebSocket
framing (RFC 6455), bad input, capacity, and that a session's sandbox goes
with it however the client leaves."""
import asyncio
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import Server, wait_no_sandboxes
import oe

TASK = "fix-permissions"


def http(server, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.http + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Raw:
    """A hand-made WebSocket client, to send what a library never would."""

    def __init__(self, server):
        self.s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                        "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n" % key).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.s.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"sec-websocket-extensions" not in head.lower(), "no extension is agreed"

    def send(self, opcode, payload, fin=True, masked=True, rsv=0):
        h = bytes([(0x80 if fin else 0) | rsv | opcode])
        n = len(payload)
        m = 0x80 if masked else 0
        if n < 126:
            h += bytes([m | n])
        elif n < 65536:
            h += bytes([m | 126]) + struct.pack(">H", n)
        else:
            h += bytes([m | 127]) + struct.pack(">Q", n)
        if masked:
            key = os.urandom(4)
            k = (key * (n // 4 + 1))[:n]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")
            h += key
        self.s.sendall(h + payload)

    def _exact(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return b

    def frame(self):
        b0, b1 = self._exact(2)
        n = b1 & 0x7F
        assert not b1 & 0x80, "server frames are never masked"
        if n == 126:
            n = struct.unpack(">H", self._exact(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._exact(8))[0]
        return b0 & 0x0F, self._exact(n)

    def message(self):
        while True:
            op, p = self.frame()
            if op == 0x1:
                return json.loads(p)
            if op == 0x8:
                return {"close": struct.unpack(">H", p[:2])[0] if len(p) >= 2 else None}

    def close(self):
        self.s.close()


def test_health_metadata_schema(server):
    assert http(server, "GET", "/health") == (200, {"status": "healthy"})
    st, meta = http(server, "GET", "/metadata")
    assert st == 200 and meta["name"] == "sbx" and "description" in meta
    st, schema = http(server, "GET", "/schema")
    assert st == 200 and set(schema) == {"action", "observation", "state"}
    assert "evaluate" in schema["action"]["properties"]["action_type"]["enum"]
    assert http(server, "GET", "/nope")[0] == 404
    assert http(server, "POST", "/health", {})[0] == 405
    assert http(server, "GET", "/ws")[0] == 426


def test_http_is_stateless(server):
    assert http(server, "GET", "/state") == (200, {"episode_id": None, "step_count": 0})
    st, r = http(server, "POST", "/reset", {"task_id": TASK})
    assert st == 200, r
    assert r["done"] is False and r["reward"] == 0.0
    assert r["observation"]["task_id"] == TASK and r["observation"]["instruction"]
    assert wait_no_sandboxes(server, 2) == 0, "POST /reset closes its environment"
    st, r = http(server, "POST", "/step", {"action": {"action_type": "exec", "command": "true"}})
    assert st == 200 and r["observation"]["error"] and r["reward"] is None
    st, r = http(server, "POST", "/step", {"action": {"action_type": "teleport"}})
    assert st == 422 and r["detail"][0]["loc"] == ["body", "action"]
    st, r = http(server, "POST", "/reset", {"task_id": "../etc"})
    assert st == 422
    st, r = http(server, "POST", "/step", {"action": {"command": "x", "extra": 1}})
    assert st == 422, "extra action fields are forbidden"


def test_episode_reset_exec_state_close(server):
    async def play():
        async with oe.connect(server.url) as ws:
            r = await oe.reset(ws, TASK)
            assert r["type"] == "observation", r
            d = r["data"]
            assert d["reward"] == 0.0 and d["done"] is False
            assert d["observation"]["instruction"] and d["observation"]["action_type"] == "reset"
            assert len(server.sandboxes()) == 1
            r = await oe.exec_(ws, "echo hello; exit 3")
            o = r["data"]["observation"]
            assert "hello" in o["output"] and o["success"] is False
            assert o["info"]["exit_code"] == 3 and r["data"]["reward"] is None
            r = await oe.call(ws, {"type": "state"})
            assert r["type"] == "state" and r["data"]["step_count"] == 1
            assert r["data"]["task_id"] == TASK and r["data"]["terminal_ready"] is True
            # the tests are not in the sandbox before evaluate
            r = await oe.exec_(ws, "ls /tests 2>&1; ls /logs/verifier 2>&1 | wc -l")
            assert "No such file" in r["data"]["observation"]["output"], r
            await ws.send(json.dumps({"type": "close"}))
            await ws.wait_closed()
        assert wait_no_sandboxes(server, 2) == 0
    asyncio.run(play())


def test_bad_messages_get_error_frames_and_change_nothing(server):
    async def play():
        async with oe.connect(server.url) as ws:
            for msg, code in [("not json", "INVALID_JSON"), ("[1]", "VALIDATION_ERROR"),
                              ('{"type":"teleport"}', "UNKNOWN_TYPE"), ('{"data":{}}', "UNKNOWN_TYPE"),
                              ('{"type":"reset","data":{}}', "VALIDATION_ERROR"),
                              ('{"type":"reset","data":{"task_id":"no-such-task"}}', "VALIDATION_ERROR"),
                              ('{"type":"step","data":{"command":"ls"}}', "EXECUTION_ERROR"),
                              ('{"type":"step"}', "VALIDATION_ERROR"),
                              ('{"type":"step","data":{"action_type":"fly"}}', "VALIDATION_ERROR"),
                              ('{"type":"step","data":{"command":"x","bogus":1}}', "VALIDATION_ERROR")]:
                await ws.send(msg)
                r = json.loads(await ws.recv())
                assert r["type"] == "error" and r["data"]["code"] == code, (msg, r)
                assert r["data"]["message"]
            await ws.send(b'{"type":"state"}')
            r = json.loads(await ws.recv())
            assert r["type"] == "error", "binary messages are refused"
            r = await oe.call(ws, {"type": "state"})
            assert r["type"] == "state" and r["data"]["step_count"] == 0 and r["data"]["episode_id"] is None
        assert server.sandboxes() == []
    asyncio.run(play())


@pytest.mark.parametrize("what", ["unmasked", "bad_opcode", "rsv", "big_ping", "oversize", "bad_utf8",
                                  "stray_continuation"])
def test_bad_frames(server, what):
    c = Raw(server)
    c.send(0x1, b'{"type":"state"}')
    assert c.message()["type"] == "state"
    if what == "unmasked":
        c.send(0x1, b'{"type":"state"}', masked=False)
    elif what == "bad_opcode":
        c.send(0x3, b"x")
    elif what == "rsv":
        c.send(0x1, b'{"type":"state"}', rsv=0x40)
    elif what == "big_ping":
        c.send(0x9, b"p" * 126)
    elif what == "oversize":
        # The header alone announces 17 MiB: refused before any payload.
        c.s.sendall(bytes([0x81, 0x80 | 127]) + struct.pack(">Q", 17 << 20) + os.urandom(4))
    elif what == "bad_utf8":
        c.send(0x1, b'"\xc0\xaf"')
    elif what == "stray_continuation":
        c.send(0x0, b"x")
    r = c.message()
    assert r.get("type") == "error", r
    assert r["data"]["code"] in ("PROTOCOL_ERROR", "MESSAGE_TOO_BIG"), r
    closing = c.message()
    want = {"oversize": 1009, "bad_utf8": 1007}.get(what, 1002)
    assert closing == {"close": want}, closing
    c.close()
    assert http(server, "GET", "/health")[0] == 200
    assert server.sandboxes() == []


def test_ping_pong_fragments_and_16mib(server):
    c = Raw(server)
    c.send(0x9, b"hi")
    assert c.frame() == (0xA, b"hi"), "a ping is answered with its payload"
    c.send(0x1, b'{"type":', fin=False)
    c.send(0x9, b"between")
    assert c.frame() == (0xA, b"between")
    c.send(0x0, b'"sta', fin=False)
    c.send(0x0, b'te"}')
    assert c.message()["type"] == "state"
    # A 16 MiB message (the default limit) is taken whole and answered.
    big = b'{"type":"nothing","pad":"' + b"x" * ((16 << 20) - 40) + b'"}'
    assert len(big) <= 16 << 20
    c.send(0x1, big)
    r = c.message()
    assert r["data"]["code"] == "UNKNOWN_TYPE", r
    c.send(0x8, struct.pack(">H", 1000))
    assert c.frame() == (0x8, struct.pack(">H", 1000)), "the close handshake is answered"
    c.close()


def test_capacity_reached():
    s = Server("--max-sessions", "1")
    try:
        async def play():
            async with oe.connect(s.url) as a:
                r = await oe.call(a, {"type": "state"})
                assert r["type"] == "state"
                async with oe.connect(s.url) as b:
                    r = json.loads(await b.recv())
                    assert r["type"] == "error" and r["data"]["code"] == "CAPACITY_REACHED", r
                    assert r["data"]["active_sessions"] == 1 and r["data"]["max_sessions"] == 1
                    await b.wait_closed()
                r = await oe.call(a, {"type": "state"})
                assert r["type"] == "state", "the first session is untouched"
            # the slot is free again
            async with oe.connect(s.url) as c:
                assert (await oe.call(c, {"type": "state"}))["type"] == "state"
        asyncio.run(play())
    finally:
        s.stop()


CLIENT = r"""
import asyncio, json, sys, websockets
async def main():
    async with websockets.connect(sys.argv[1]) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": sys.argv[2]}}))
        json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "step", "data": {"command": "echo ready"}}))
        json.loads(await ws.recv())
        print("ready", flush=True)
        if sys.argv[3] == "busy":
            await ws.send(json.dumps({"type": "step", "data": {"command": "sleep 600"}}))

        await asyncio.sleep(3600)
asyncio.run(main())
"""


@pytest.mark.parametrize("when", ["idle", "busy"])
def test_killed_client_leaves_no_sandbox(server, when):
    """Killed between steps, or while a 600 s step runs: the sandbox is gone
    within 2 s either way (a running step has its sandbox destroyed under it)."""
    p = subprocess.Popen([sys.executable, "-c", CLIENT, server.url, TASK, when], stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    assert len(server.sandboxes()) == 1
    if when == "busy":
        time.sleep(0.5)  # the 600 s step is running
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    assert wait_no_sandboxes(server, 2.0) == 0, "a killed client's sandbox is destroyed within 2 s"
    assert http(server, "GET", "/health")[0] == 200


def test_sigterm_destroys_live_sandboxes():
    """SIGTERM with one idle session and one in a 600 s step: both get close
    1001, both sandboxes are destroyed (the step's under it, so the server
    does not wait 600 s for it), and the server exits 0."""
    s = Server()
    try:
        async def play():
            async with oe.connect(s.url) as idle, oe.connect(s.url) as busy:
                for ws in (idle, busy):
                    assert (await oe.reset(ws, TASK))["type"] == "observation"
                assert len(s.sandboxes()) == 2
                await busy.send(json.dumps({"type": "step", "data": {"command": "sleep 600"}}))
                await asyncio.sleep(0.5)
                s.proc.send_signal(signal.SIGTERM)
                for ws in (idle, busy):
                    await ws.wait_closed()
                    assert ws.close_code == 1001
        asyncio.run(play())
        s.proc.wait(timeout=120)
    finally:
        s.stop()  # asserts exit 0 and no sandbox left


def test_planted_verdict_and_tests_are_wiped_before_evaluate(server):
    """An agent that writes /logs/verifier/reward.json (which outranks the
    reward.txt test.sh writes) or makes /tests of its own gets the verifier's
    own verdict, not its plant: both are wiped before tests/ is uploaded."""
    async def play():
        async with oe.connect(server.url) as ws:
            r = await oe.reset(ws, "jq-team-directory")
            assert r["type"] == "observation"
            r = await oe.exec_(ws, "mkdir -p /logs/verifier /tests && echo '{\"reward\": 1}' > "
                                   "/logs/verifier/reward.json && echo 1 > /logs/verifier/reward.txt && "
                                   "echo planted > /tests/test_planted.py")
            assert r["data"]["observation"]["success"], r
            r = await oe.evaluate(ws)
            d = r["data"]
            assert d["reward"] == 0.0 and d["done"] is True, d
            info = d["observation"]["info"]
            assert info["reward_source"] == "reward.txt" and info["tests_passed"] is False, info
            assert info["harness"] == "tests/test.sh"
    asyncio.run(play())


def test_per_message_deadline_and_server_pings():
    """A frame started and never finished is cut at --message-timeout (1008);
    a client that answers none of the server's pings is dropped after
    --ping-timeout, and its sandbox with it."""
    s = Server("--message-timeout", "2", "--ping-interval", "1", "--ping-timeout", "3")
    try:
        c = Raw(s)
        c.s.sendall(bytes([0x81, 0x80 | 100]) + os.urandom(4) + b"x" * 10)  # 10 of 100 bytes
        seen = []
        while True:
            op, p = c.frame()
            seen.append(op)
            if op == 0x1:
                assert json.loads(p)["data"]["code"] == "PROTOCOL_ERROR"
            if op == 0x8:
                assert struct.unpack(">H", p[:2])[0] == 1008
                break
        c.close()

        async def silent():
            # websockets answers pings by itself: a raw socket that never reads does not.
            c = Raw(s)
            c.send(0x1, json.dumps({"type": "reset", "data": {"task_id": TASK}}).encode())
            assert c.message()["type"] == "observation"
            assert len(s.sandboxes()) == 1
            op, p = c.frame()
            assert op == 0x9, "the server pings"
            await asyncio.sleep(6)  # no pong, nothing else: dropped after 3 s
            return c
        c = asyncio.run(silent())
        assert wait_no_sandboxes(s, 2) == 0, "a session that stopped answering is dropped"
        c.close()

        async def lively():
            async with oe.connect(s.url) as ws:  # answers pings
                await asyncio.sleep(5)
                assert (await oe.call(ws, {"type": "state"}))["type"] == "state"
        asyncio.run(lively())
    finally:
        s.stop()


def test_no_verdict_is_an_error_not_a_zero(server):
    """When tests/test.sh writes no reward (here the agent took bash away, so
    it cannot even start), evaluate answers reward null, done false and an
    error, as OpenEnv's environment does: a trainer drops the sample."""
    async def play():
        async with oe.connect(server.url) as ws:
            assert (await oe.reset(ws, TASK))["type"] == "observation"
            r = await oe.exec_(ws, "mv /usr/bin/bash /usr/bin/bash.gone")
            assert r["data"]["observation"]["success"], r
            r = await oe.evaluate(ws)
            d = r["data"]
            assert r["type"] == "observation" and d["reward"] is None and d["done"] is False, d
            o = d["observation"]
            assert o["error"].startswith("no verdict: VerifierError"), o
            assert "harness" not in o["info"] and o["success"] is False
            r = await oe.exec_(ws, "true")
            assert r["type"] == "error" and r["data"]["code"] == "EXECUTION_ERROR"
        assert wait_no_sandboxes(server, 2) == 0
    asyncio.run(play())
