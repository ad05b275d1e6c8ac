# SPDX-License-Identifier: MIT
"""sbx: per-episode sandboxes for agentic RL, from Python.

Pure Python over libsbx.so (ctypes); see docs/python.md.

    import sbx
    with sbx.Sandbox("busybox") as sb:
        print(sb.exec("echo hi").stdout_text)

    rec = sbx.run_episode("tasks/fix-git")          # the oracle plays it
    ep = sbx.Episode("tasks/fix-git")               # or your policy does
    prompt = ep.reset(); obs = ep.step("ls"); rec = ep.evaluate(); rec.reward
"""
from __future__ import annotations

from .episode import Episode, Observation
from .errors import (AlreadyExists, Cancelled, Closed, CredentialsMissing, InvalidArgument,
                     NotFound, NotSupported, PermissionDenied, SbxError, Throttled, Timeout,
                     TooLarge)
from .runtime import Runtime, SandboxInfo, default_runtime, resolve_backend, set_default_runtime
from .sandbox import ExecResult, Sandbox, Stats
from .task import STAGES, EpisodeRecord, Task, run_episode

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "ExecResult", "Stats", "Runtime", "SandboxInfo", "default_runtime", "set_default_runtime",
    "resolve_backend", "Task", "EpisodeRecord", "run_episode", "STAGES", "Episode",
    "Observation", "SbxError", "NotFound", "InvalidArgument", "Timeout", "Throttled",
    "Cancelled", "PermissionDenied", "AlreadyExists", "NotSupported", "CredentialsMissing",
    "TooLarge", "Closed", "library_path",
]


def library_path() -> str:
    """The path of the libsbx.so in use (loading it if needed)."""
    from . import _lib
    import ctypes
    lib = _lib.lib()
    for cand in _lib.candidates():
        try:
            if ctypes.CDLL(cand)._handle == lib._handle:
                return cand
        except OSError:
            continue
    return lib._name
