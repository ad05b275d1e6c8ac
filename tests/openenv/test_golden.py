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
