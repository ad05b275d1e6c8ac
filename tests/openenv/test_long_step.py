# SPDX-License-Identifier: MIT
"""A step that runs longer than 60 s, under a client that pings every 20 s and
gives up after 20 s without a pong (the reference framework's settings): the
event loop answers pings while a worker runs the step, and pings the client."""
import asyncio
import time

import oe

TASK = "fix-permissions"


def test_step_over_60s_with_a_pinging_client(server):
    async def play():
        pings = []
        async with oe.connect(server.url, ping_interval=20, ping_timeout=20) as ws:
            r = await oe.reset(ws, TASK)
            assert r["type"] == "observation"
            t0 = time.monotonic()
            r = await oe.exec_(ws, "sleep 65; echo done-sleeping")
            took = time.monotonic() - t0
            o = r["data"]["observation"]
            assert o["success"] and "done-sleeping" in o["output"], o
            # the connection is alive and well after it
            pong = await ws.ping()
            pings.append(await asyncio.wait_for(pong, 20))
            r = await oe.call(ws, {"type": "state"})
            assert r["data"]["step_count"] == 1
            return took
    took = asyncio.run(play())
    assert took >= 65
