#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python package's call costs on the local backend (docs/python.md,
"Figures"): create+exec+destroy, exec, a 4 KiB file round trip, run_episode,
and concurrent sbx.aio episodes. Needs root and the busybox test image:

    bench/python_api.py BUILD_DIR

It uses BUILD_DIR's libsbx.so, its test image store (BUILD_DIR/test-images,
made by the test suite) and a private state dir it removes."""
from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SRC / "python"))


def q(v):
    v = sorted(v)
    return f"median {statistics.median(v) * 1000:.1f} ms, p90 {v[int(len(v) * 0.9)] * 1000:.1f} ms"


def main(build: Path) -> None:
    os.environ.setdefault("SBX_LIBRARY", str(build / "libsbx.so"))
    os.environ.setdefault("SBX_SCRATCH_DIR", str(build / "test-scratch"))
    import sbx
    import sbx.aio
    state = tempfile.mkdtemp(prefix="sbx-bench-py-")
    rt = sbx.Runtime(state_dir=state, image_dir=str(build / "test-images"))
    if not rt.has_image("busybox"):
        sys.exit("no busybox image in BUILD_DIR/test-images: run the python tests once")
    sbx.set_default_runtime(rt)
    task = str(SRC / "tests/fixtures/tasks/pass")
    try:
        cyc = []
        for _ in range(50):
            t = time.perf_counter()
            with sbx.Sandbox("busybox") as sb:
                sb.exec("true")
            cyc.append(time.perf_counter() - t)
        print("create + exec + destroy (50):", q(cyc))
        with sbx.Sandbox("busybox") as sb:
            ex, rw = [], []
            for _ in range(200):
                t = time.perf_counter()
                sb.exec("true")
                ex.append(time.perf_counter() - t)
            for _ in range(200):
                t = time.perf_counter()
                sb.write_file("/tmp/x", b"x" * 4096)
                sb.read_file("/tmp/x")
                rw.append(time.perf_counter() - t)
        print("exec true (200):", q(ex))
        print("write_file + read_file 4 KiB (200):", q(rw))
        eps = []
        for _ in range(20):
            t = time.perf_counter()
            assert sbx.run_episode(task).reward == 1.0
            eps.append(time.perf_counter() - t)
        print("run_episode oracle (20):", q(eps))

        async def one():
            async with sbx.aio.Episode(task) as ep:
                await ep.reset()
                await ep.step("echo hello > /tmp/answer")
                return (await ep.evaluate()).reward

        async def many(n):
            t = time.perf_counter()
            r = await asyncio.gather(*(one() for _ in range(n)))
            return time.perf_counter() - t, r
        for n in (1, 8, 32):
            dt, r = asyncio.run(many(n))
            print(f"aio episodes, {n} at once: {dt:.2f} s wall, rewards {sum(r):g}/{n}")
    finally:
        rt.close()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/python_api.py BUILD_DIR")
    main(Path(sys.argv[1]).resolve())
