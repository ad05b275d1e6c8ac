# SPDX-License-Identifier: MIT
"""Every bundled task played over WS /ws as a trainer would: reset, the
oracle's moves as exec steps, evaluate -> reward 1; then 32 sessions at once."""
import asyncio
import os
import time

from conftest import TASKS, wait_no_sandboxes
import oe

NAMES = sorted(d for d in os.listdir(TASKS) if os.path.isfile(os.path.join(TASKS, d, "task.toml")))


async def play(url, task):
    async with oe.connect(url) as ws:
        r = await oe.reset(ws, task)
        assert r["type"] == "observation", (task, r)
        for cmd in oe.oracle_commands(os.path.join(TASKS, task)):
            r = await oe.exec_(ws, cmd)
            o = r["data"]["observation"]
            assert o["success"], (task, cmd[:80], o["output"][-2000:], o["error"])
        r = await oe.call(ws, {"type": "state"})
        before = r["data"]["step_count"]
        # the verifier's files are still outside the sandbox
        r = await oe.exec_(ws, "test ! -e /tests && test -z \"$(ls -A /logs/verifier 2>/dev/null)\"")
        assert r["data"]["observation"]["success"], (task, "tests/ or a verdict visible before evaluate")
        r = await oe.evaluate(ws)
        assert r["type"] == "observation", (task, r)
        d = r["data"]
        info = d["observation"]["info"]
        assert d["reward"] == 1.0 and d["done"] is True, (task, d)
        assert info["harness"] == "tests/test.sh" and info["tests_passed"] is True, (task, info)
        r = await oe.call(ws, {"type": "state"})
        assert r["data"]["step_count"] == before + 2 and r["data"]["terminal_ready"] is False
        r = await oe.exec_(ws, "true")
        assert r["type"] == "error", "the episode is over after evaluate"
        return d["reward"]


def test_every_bundled_task_reward_1(server):
    assert len(NAMES) == 12, NAMES

    async def run():
        sem = asyncio.Semaphore(4)

        async def one(t):
            async with sem:
                return await play(server.url, t)
        return await asyncio.gather(*(one(t) for t in NAMES))
    t0 = time.monotonic()
    rewards = asyncio.run(run())
    print("12 tasks over WS in %.1f s" % (time.monotonic() - t0))
    assert rewards == [1.0] * 12
    assert wait_no_sandboxes(server, 2) == 0


def test_32_concurrent_sessions(server):
    async def run():
        return await asyncio.gather(*(play(server.url, NAMES[i % len(NAMES)]) for i in range(32)))
    t0 = time.monotonic()
    rewards = asyncio.run(run())
    print("32 concurrent sessions in %.1f s" % (time.monotonic() - t0))
    assert rewards == [1.0] * 32
    assert wait_no_sandboxes(server, 2) == 0


def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def test_64_sessions_at_once_and_no_thread_per_idle_socket(server):
    """64 sessions, each with its own live sandbox at the same moment; idle
    sockets cost no thread (the loop is one thread; workers come per call)."""
    async def run():
        base = threads(server.proc.pid)
        conns = [await oe.connect(server.url).__aenter__() for _ in range(64)]
        try:
            for ws in conns:
                assert (await oe.call(ws, {"type": "state"}))["type"] == "state"
            assert threads(server.proc.pid) <= base, "64 idle sessions started threads"
            t0 = time.monotonic()
            rs = await asyncio.gather(*(oe.reset(ws, NAMES[i % len(NAMES)]) for i, ws in enumerate(conns)))
            assert all(r["type"] == "observation" for r in rs), [r for r in rs if r["type"] != "observation"][:1]
            print("64 resets at once in %.1f s" % (time.monotonic() - t0))
            assert len(server.sandboxes()) == 64
            rs = await asyncio.gather(*(oe.exec_(ws, "echo ok-%d" % i) for i, ws in enumerate(conns)))
            assert all("ok-%d" % i in r["data"]["observation"]["output"] for i, r in enumerate(rs))
        finally:
            for ws in conns:
                await ws.close()
    asyncio.run(run())
    assert wait_no_sandboxes(server, 2) == 0
