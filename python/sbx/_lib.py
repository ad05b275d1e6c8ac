# SPDX-License-Identifier: MIT
"""Loads libsbx.so and declares the C structs and prototypes the package uses.

Only this module knows the C ABI; the rest of the package calls ``lib()``.
The structs mirror include/sbx/*.h field for field (their layout is the ABI).
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_size_t,
                    c_uint, c_ulonglong, c_void_p)
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

#: Environment variable naming the libsbx.so to load (docs/python.md).
LIBRARY_ENV = "SBX_LIBRARY"
#: The installed soname, found through the dynamic loader's cache.
SONAME = "libsbx.so.0"

c_char_pp = POINTER(c_char_p)


class SbxErrorT(Structure):
    _fields_ = [("code", c_int), ("sys_errno", c_int), ("http_status", c_int),
                ("provider", c_char_p), ("msg", c_char_p)]


class RuntimeOpts(Structure):
    _fields_ = [("version", c_uint), ("state_dir", c_char_p), ("image_dir", c_char_p),
                ("default_provider", c_char_p), ("log", c_void_p), ("log_payload", c_void_p),
                ("log_level", c_int)]


class SandboxOpts(Structure):
    _fields_ = [("version", c_uint), ("provider", c_char_p), ("image", c_char_p),
                ("cpus", c_double), ("memory_mb", c_uint), ("storage_mb", c_uint),
                ("pids_max", c_uint), ("network", c_int), ("env", c_char_pp),
                ("workdir", c_char_p), ("user", c_char_p), ("ttl_s", c_uint),
                ("labels", c_char_pp), ("hostname", c_char_p), ("upper_dir", c_char_p),
                ("detach", c_int), ("userns", c_int), ("allow_out", c_char_pp),
                ("deny_out", c_char_pp), ("nofile_max", c_uint), ("net_raw", c_int),
                ("scratch", c_int)]


class PoolOpts(Structure):
    _fields_ = [("version", c_uint), ("spec", POINTER(SandboxOpts)), ("size", c_uint),
                ("task", c_char_p)]


class CreateCtl(Structure):
    _fields_ = [("version", c_uint), ("cancel", c_void_p), ("timeout_s", c_double),
                ("task", c_char_p), ("keepalive", c_int), ("attempts", c_uint)]


OutputFn = CFUNCTYPE(None, c_int, c_void_p, c_size_t, c_void_p)


class ExecOpts(Structure):
    _fields_ = [("version", c_uint), ("argv", c_char_pp), ("shell", c_char_p),
                ("env", c_char_pp), ("cwd", c_char_p), ("user", c_char_p),
                ("stdin_data", c_void_p), ("stdin_len", c_size_t), ("timeout_s", c_double),
                ("output_max", c_size_t), ("on_output", c_void_p), ("payload", c_void_p),
                ("stdout_fd", c_int), ("stderr_fd", c_int), ("stdin_fd", c_int),
                ("fds_are_private", c_int), ("tty", c_int), ("tty_rows", c_uint),
                ("tty_cols", c_uint)]


class ExecResultT(Structure):
    _fields_ = [("exit_code", c_int), ("signal", c_int), ("timed_out", c_int),
                ("out", c_void_p), ("out_len", c_size_t), ("err", c_void_p),
                ("err_len", c_size_t), ("out_truncated", c_int), ("err_truncated", c_int),
                ("seconds", c_double)]


class SandboxInfoT(Structure):
    _fields_ = [("id", c_char_p), ("provider", c_char_p), ("image", c_char_p),
                ("state", c_char_p), ("labels", c_char_pp), ("created_at", c_double),
                ("expires_at", c_double), ("leaked", c_int), ("pid", c_int)]


class StatsT(Structure):
    _fields_ = [("cpu_s", c_double), ("mem_bytes", c_ulonglong), ("mem_cache_bytes", c_ulonglong),
                ("disk_bytes", c_ulonglong), ("disk_total_bytes", c_ulonglong)]


class TaskT(Structure):
    _fields_ = [("name", c_char_p), ("dir", c_char_p), ("toml_path", c_char_p),
                ("schema_version", c_char_p), ("legacy", c_int), ("registry_name", c_char_p),
                ("instruction", c_char_p), ("docker_image", c_char_p),
                ("has_dockerfile", c_int), ("has_solution", c_int), ("os", c_char_p),
                ("cpus", c_double), ("memory_mb", c_uint), ("storage_mb", c_uint),
                ("gpus", c_uint), ("build_timeout_sec", c_double),
                ("agent_timeout_sec", c_double), ("verifier_timeout_sec", c_double),
                ("env", c_char_pp), ("verifier_env", c_char_pp), ("solution_env", c_char_pp),
                ("workdir", c_char_p), ("network_mode", c_char_p), ("allowed_hosts", c_char_pp),
                ("agent_user", c_char_p), ("verifier_user", c_char_p), ("warnings", c_char_pp),
                ("connector", c_void_p), ("connector_data", c_void_p)]


EPISODE_STAGES = 5


class EpisodeOpts(Structure):
    _fields_ = [("version", c_uint), ("provider", c_char_p), ("agent", c_char_p),
                ("max_episode_s", c_double), ("agent_timeout_s", c_double),
                ("logs_dir", c_char_p), ("labels", c_char_pp), ("on_stage", c_void_p),
                ("payload", c_void_p), ("force_build", c_int), ("agent_args", c_char_pp),
                ("pool", c_uint)]


class EpisodeResultT(Structure):
    _fields_ = [("task", c_char_p), ("agent", c_char_p), ("status", c_int),
                ("has_reward", c_int), ("reward", c_double), ("rewards_json", c_char_p),
                ("reward_source", c_char_p), ("detail", c_char_p), ("image", c_char_p),
                ("image_how", c_char_p), ("sandbox_id", c_char_p), ("agent_exit_code", c_int),
                ("agent_timed_out", c_int), ("verifier_ran", c_int),
                ("verifier_exit_code", c_int), ("verifier_timed_out", c_int),
                ("stage_seconds", c_double * EPISODE_STAGES), ("total_seconds", c_double),
                ("logs_dir", c_char_p), ("agent_log_tail", c_char_p),
                ("verifier_log_tail", c_char_p), ("end_reason", c_char_p),
                ("agent_metrics_json", c_char_p), ("extra_json", c_char_p),
                ("trajectory_json", c_char_p)]


class ObservationT(Structure):
    _fields_ = [("output", c_void_p), ("output_len", c_size_t), ("exit_code", c_int),
                ("timed_out", c_int), ("truncated", c_int), ("seconds", c_double),
                ("done", c_int)]


ErrPP = POINTER(POINTER(SbxErrorT))
_P = c_void_p

# name: (restype, argtypes). Every call releases the GIL (CDLL), so worker
# threads of sbx.aio run library calls in parallel.
_PROTOS = {
    "sbx_error_free": (None, [POINTER(SbxErrorT)]),
    "sbx_error_code_name": (c_char_p, [c_int]),
    "sbx_runtime_new": (c_int, [POINTER(_P), POINTER(RuntimeOpts), ErrPP]),
    "sbx_runtime_free": (None, [_P]),
    "sbx_runtime_state_dir": (c_char_p, [_P]),
    "sbx_runtime_image_dir": (c_char_p, [_P]),
    "sbx_backend_resolve": (c_int, [POINTER(c_void_p), c_char_p, ErrPP]),
    "sbx_network_parse": (c_int, [POINTER(c_int), c_char_p]),
    "sbx_cancel_new": (_P, []),
    "sbx_cancel_fire": (None, [_P]),
    "sbx_cancel_free": (None, [_P]),
    "sbx_sandbox_create_ex": (c_int, [POINTER(_P), _P, POINTER(SandboxOpts),
                                      POINTER(CreateCtl), ErrPP]),
    "sbx_pool_add": (c_int, [_P, POINTER(PoolOpts), ErrPP]),
    "sbx_pool_wait": (c_int, [_P, c_double, ErrPP]),
    "sbx_pool_ready": (c_uint, [_P]),
    "sbx_sandbox_open": (c_int, [POINTER(_P), _P, c_char_p, c_char_p, ErrPP]),
    "sbx_sandbox_fork": (c_int, [POINTER(_P), c_size_t, _P, _P, ErrPP]),
    "sbx_sandbox_id": (c_char_p, [_P]),
    "sbx_sandbox_provider": (c_char_p, [_P]),
    "sbx_sandbox_destroy": (c_int, [_P, ErrPP]),
    "sbx_sandbox_destroy_id": (c_int, [_P, c_char_p, c_char_p, ErrPP]),
    "sbx_sandbox_free": (None, [_P]),
    "sbx_sandbox_exec": (c_int, [POINTER(ExecResultT), _P, POINTER(ExecOpts), ErrPP]),
    "sbx_exec_result_free": (None, [POINTER(ExecResultT)]),
    "sbx_sandbox_write_file": (c_int, [_P, c_char_p, c_void_p, c_size_t, c_uint, ErrPP]),
    "sbx_sandbox_read_file": (c_int, [POINTER(c_void_p), POINTER(c_size_t), _P, c_char_p,
                                      c_size_t, ErrPP]),
    "sbx_sandbox_upload": (c_int, [_P, c_char_p, c_char_p, ErrPP]),
    "sbx_sandbox_download": (c_int, [_P, c_char_p, c_char_p, ErrPP]),
    "sbx_sandbox_set_timeout": (c_int, [_P, c_uint, ErrPP]),
    "sbx_sandbox_list": (c_int, [POINTER(POINTER(SandboxInfoT)), POINTER(c_size_t), _P,
                                 c_char_p, c_char_pp, ErrPP]),
    "sbx_sandbox_info_get": (c_int, [POINTER(POINTER(SandboxInfoT)), _P, ErrPP]),
    "sbx_sandbox_stats": (c_int, [POINTER(StatsT), _P, ErrPP]),
    "sbx_sandbox_info_free": (None, [POINTER(SandboxInfoT), c_size_t]),
    "sbx_image_get": (c_int, [POINTER(_P), _P, c_char_p, ErrPP]),
    "sbx_image_free": (None, [_P]),
    "sbx_image_import": (c_int, [POINTER(_P), _P, c_char_p, c_char_p, ErrPP]),
    "sbx_task_load": (c_int, [POINTER(POINTER(TaskT)), c_char_p, ErrPP]),
    "sbx_task_free": (None, [POINTER(TaskT)]),
    "sbx_task_list": (c_int, [POINTER(c_char_pp), POINTER(c_size_t), c_char_p, ErrPP]),
    "sbx_task_names_free": (None, [c_char_pp]),
    "sbx_episode_run": (c_int, [POINTER(EpisodeResultT), _P, POINTER(TaskT),
                                POINTER(EpisodeOpts), ErrPP]),
    "sbx_episode_result_free": (None, [POINTER(EpisodeResultT)]),
    "sbx_episode_result_to_json": (c_void_p, [POINTER(EpisodeResultT)]),
    "sbx_episode_status_name": (c_char_p, [c_int]),
    "sbx_episode_stage_name": (c_char_p, [c_int]),
}

# The turn-by-turn API (include/sbx/episode.h) is bound when the library has
# it, so the rest of the package works with a library built before it.
_OPTIONAL = {
    "sbx_episode_begin": (c_int, [POINTER(_P), _P, POINTER(TaskT), POINTER(EpisodeOpts),
                                  ErrPP]),
    "sbx_episode_turn": (c_int, [POINTER(ObservationT), _P, c_char_p, c_double, ErrPP]),
    "sbx_observation_free": (None, [POINTER(ObservationT)]),
    "sbx_episode_end": (c_int, [POINTER(EpisodeResultT), _P, ErrPP]),
    "sbx_episode_abort": (None, [_P]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_libc: Optional[ctypes.CDLL] = None


def candidates() -> List[str]:
    """Where libsbx.so is looked for, in order (docs/python.md)."""
    out: List[str] = []
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return [env]
    pkg = Path(__file__).resolve().parent
    try:  # written by `meson install` next to the installed package
        from . import _installed  # type: ignore[attr-defined]
        out.append(str(Path(_installed.LIBDIR) / SONAME))
    except ImportError:
        pass
    root = pkg.parent.parent  # python/sbx -> the source tree
    builds = sorted(root.glob("build*/libsbx.so"),
                    key=lambda p: (p.parent.name != "build", p.parent.name))
    out.extend(str(p) for p in builds)
    out.append(SONAME)
    return out


def _declare(lib: ctypes.CDLL) -> None:
    for name, (res, args) in _PROTOS.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    for name, (res, args) in _OPTIONAL.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib, _libc
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidates():
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            _declare(handle)
            libc = ctypes.CDLL(None)
            libc.free.restype = None
            libc.free.argtypes = [c_void_p]
            _libc = libc
            _lib = handle
            return handle
        raise ImportError("sbx: cannot load libsbx.so; tried: " + "; ".join(tried) +
                          f"; set {LIBRARY_ENV} to the library's path")


def has(name: str) -> bool:
    """Whether the loaded library exports NAME (optional parts of the API)."""
    return hasattr(lib(), name)


def free(ptr: Optional[int]) -> None:
    """free(3) for buffers the library documents as freed with free()."""
    lib()
    if ptr and _libc is not None:
        _libc.free(ptr)


def cstr(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


def pystr(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else b.decode("utf-8", "replace")


class StrArray:
    """A NULL-terminated ``char **`` kept alive as long as this object."""

    def __init__(self, items: Iterable[str]):
        enc = [s.encode() for s in items]
        self.array = (c_char_p * (len(enc) + 1))(*enc, None)

    @property
    def ptr(self) -> "ctypes._Pointer[c_char_p]":
        return ctypes.cast(self.array, c_char_pp)


def str_array(items: Optional[Sequence[str]]) -> Optional[StrArray]:
    return None if items is None else StrArray(items)


def read_strv(p: "ctypes._Pointer[c_char_p]") -> List[str]:
    """A NULL-terminated ``char **`` as a list (NULL pointer -> [])."""
    out: List[str] = []
    if not p:
        return out
    i = 0
    while p[i] is not None:
        out.append(p[i].decode("utf-8", "replace"))
        i += 1
    return out
