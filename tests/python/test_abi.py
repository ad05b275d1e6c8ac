"""The ctypes mirrors in sbx._lib have the size of the C structs they stand
for (a field appended in C but not in Python once made every run_episode
read a random warm-pool size past the end of Python's struct)."""
import ctypes
import os
import subprocess

import pytest

from sbx import _lib

PAIRS = {
    "sbx_error": "SbxErrorT", "sbx_runtime_opts": "RuntimeOpts",
    "sbx_sandbox_opts": "SandboxOpts", "sbx_pool_opts": "PoolOpts",
    "sbx_create_ctl": "CreateCtl", "sbx_exec_opts": "ExecOpts",
    "sbx_exec_result": "ExecResultT", "sbx_sandbox_info": "SandboxInfoT", "sbx_stats": "StatsT",
    "sbx_task": "TaskT", "sbx_episode_opts": "EpisodeOpts",
    "sbx_episode_result": "EpisodeResultT", "sbx_observation": "ObservationT",
}


def test_ctypes_structs_match_the_headers():
    exe = os.environ.get("SBX_STRUCT_SIZES")
    if not exe:
        pytest.fail("SBX_STRUCT_SIZES is not set (tests/python/meson.build builds it)")
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    sizes = dict((name, int(n)) for name, n in (line.split() for line in out.splitlines()))
    assert set(sizes) == set(PAIRS)
    for c_name, py_name in PAIRS.items():
        assert ctypes.sizeof(getattr(_lib, py_name)) == sizes[c_name], \
            f"{py_name} is {ctypes.sizeof(getattr(_lib, py_name))} bytes, {c_name} {sizes[c_name]}"
