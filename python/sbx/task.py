# SPDX-License-Identifier: MIT
"""Tasks (Harbor task directories) and whole episodes played by an agent."""
from __future__ import annotations

import ctypes
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from . import _args, _lib
from .errors import Closed, InvalidArgument, call
from .runtime import Runtime, _labels_list, default_runtime, resolve_backend

PathLike = Union[str, "os.PathLike[str]"]

#: Stage names, in order, as the record's ``stage_seconds`` keys.
STAGES = ("resolve", "create", "exec", "verify", "destroy")


class Task:
    """A loaded task directory (``sbx_task``); see docs/tasks.md.

    Use :meth:`load`. The attributes are read from the library's task; the
    task is freed by :meth:`close` (or garbage collection).
    """

    name: str
    dir: str
    instruction: str
    docker_image: Optional[str]
    has_dockerfile: bool
    has_solution: bool
    cpus: float
    memory_mb: int
    storage_mb: int
    agent_timeout_sec: float
    verifier_timeout_sec: float
    build_timeout_sec: float
    workdir: Optional[str]
    network_mode: Optional[str]
    warnings: List[str]

    def __init__(self) -> None:
        raise TypeError("use sbx.Task.load(dir)")

    @classmethod
    def load(cls, task_dir: PathLike) -> "Task":
        """Loads and validates a task directory. Raises NotFound (a required
        file is missing; the message names it) or InvalidArgument (bad TOML or
        value; the message names the file, line and field)."""
        d = _args.text(os.fspath(task_dir), "task_dir")
        out = ctypes.POINTER(_lib.TaskT)()
        call("sbx_task_load", "load task", ctypes.byref(out), d)
        self = cls.__new__(cls)
        self._lock = threading.Lock()
        self._ptr = out
        t = out.contents
        s = _lib.pystr
        self.name, self.dir = s(t.name) or "", s(t.dir) or ""
        self.instruction = s(t.instruction) or ""
        self.docker_image = s(t.docker_image)
        self.has_dockerfile, self.has_solution = bool(t.has_dockerfile), bool(t.has_solution)
        self.cpus, self.memory_mb, self.storage_mb = t.cpus, t.memory_mb, t.storage_mb
        self.agent_timeout_sec = t.agent_timeout_sec
        self.verifier_timeout_sec = t.verifier_timeout_sec
        self.build_timeout_sec = t.build_timeout_sec
        self.workdir, self.network_mode = s(t.workdir), s(t.network_mode)
        self.warnings = _lib.read_strv(t.warnings)
        return self

    @staticmethod
    def list(tasks_dir: PathLike) -> List[str]:
        """The task directory names under ``tasks_dir``, sorted."""
        names = _lib.c_char_pp()
        n = ctypes.c_size_t()
        call("sbx_task_list", "list tasks", ctypes.byref(names), ctypes.byref(n),
             _args.text(os.fspath(tasks_dir), "tasks_dir"))
        try:
            return _lib.read_strv(names)
        finally:
            _lib.lib().sbx_task_names_free(names)

    @property
    def ptr(self) -> "ctypes._Pointer[_lib.TaskT]":
        if not self._ptr:
            raise Closed(f"task {self.name}: already closed")
        return self._ptr

    def close(self) -> None:
        """Frees the library's task. Idempotent."""
        with self._lock:
            p, self._ptr = self._ptr, None
        if p:
            _lib.lib().sbx_task_free(p)

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<sbx.Task {self.name} at {self.dir}>"


def _json(text: Optional[bytes]) -> Any:
    if not text:
        return None
    try:
        return json.loads(text.decode("utf-8", "replace"))
    except ValueError:
        return None


@dataclass(frozen=True)
class EpisodeRecord:
    """The outcome of one episode (the result record of docs/tasks.md).

    ``status`` is "Submitted", "TimeLimitExceeded", "AgentError",
    "VerifierError" or "EnvironmentError"; ``reward`` is None when the
    verifier gave none. ``stage_seconds`` maps each stage that ran
    ("resolve", "create", "exec", "verify", "destroy") to its seconds.
    ``record`` is the whole record as the library writes it (result.json).
    """
    task: str
    agent: str
    status: str
    reward: Optional[float]
    rewards: Dict[str, Any] = field(default_factory=dict)
    reward_source: Optional[str] = None
    detail: Optional[str] = None
    image: Optional[str] = None
    image_how: Optional[str] = None
    sandbox_id: Optional[str] = None
    agent_exit_code: int = -1
    agent_timed_out: bool = False
    verifier_ran: bool = False
    verifier_exit_code: int = -1
    verifier_timed_out: bool = False
    stage_seconds: Dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    logs_dir: Optional[str] = None
    agent_log_tail: Optional[str] = None
    verifier_log_tail: Optional[str] = None
    end_reason: Optional[str] = None
    agent_metrics: Optional[Dict[str, Any]] = None
    extra: Optional[Dict[str, Any]] = None
    trajectory: Optional[Dict[str, Any]] = None
    record: Dict[str, Any] = field(default_factory=dict)

    @property
    def submitted(self) -> bool:
        """The verifier wrote a reward."""
        return self.status == "Submitted"


def record_from(res: _lib.EpisodeResultT) -> EpisodeRecord:
    """Copies a filled ``sbx_episode_result`` (the caller frees it)."""
    lib, s = _lib.lib(), _lib.pystr
    raw = lib.sbx_episode_result_to_json(ctypes.byref(res))
    try:
        record = _json(ctypes.string_at(raw)) if raw else None
    finally:
        _lib.free(raw)
    stages = {STAGES[i]: res.stage_seconds[i] for i in range(_lib.EPISODE_STAGES)
              if res.stage_seconds[i] > 0}
    return EpisodeRecord(
        task=s(res.task) or "", agent=s(res.agent) or "",
        status=s(lib.sbx_episode_status_name(res.status)) or str(res.status),
        reward=res.reward if res.has_reward else None,
        rewards=_json(res.rewards_json) or {}, reward_source=s(res.reward_source),
        detail=s(res.detail), image=s(res.image), image_how=s(res.image_how),
        sandbox_id=s(res.sandbox_id), agent_exit_code=res.agent_exit_code,
        agent_timed_out=bool(res.agent_timed_out), verifier_ran=bool(res.verifier_ran),
        verifier_exit_code=res.verifier_exit_code,
        verifier_timed_out=bool(res.verifier_timed_out), stage_seconds=stages,
        total_seconds=res.total_seconds, logs_dir=s(res.logs_dir),
        agent_log_tail=s(res.agent_log_tail), verifier_log_tail=s(res.verifier_log_tail),
        end_reason=s(res.end_reason), agent_metrics=_json(res.agent_metrics_json),
        extra=_json(res.extra_json), trajectory=_json(res.trajectory_json),
        record=record or {})


class EpisodeOptions:
    """``sbx_episode_opts`` built from keyword arguments, alive while used."""

    def __init__(self, *, agent: Optional[str] = None, backend: Optional[str] = None,
                 max_episode_s: Optional[float] = None, agent_timeout_s: Optional[float] = None,
                 logs_dir: Optional[PathLike] = None, labels: Optional[Dict[str, str]] = None,
                 agent_args: Optional[Dict[str, str]] = None, force_build: bool = False):
        o = _lib.EpisodeOpts(version=2)
        self._keep: List[object] = []
        o.provider = _lib.cstr(resolve_backend(backend)) if backend else None
        o.agent = _args.text(agent, "agent")
        o.max_episode_s = _args.seconds(max_episode_s, "max_episode_s")
        o.agent_timeout_s = _args.seconds(agent_timeout_s, "agent_timeout_s")
        o.logs_dir = _args.text(os.fspath(logs_dir), "logs_dir") if logs_dir else None
        if agent_args is not None and not isinstance(agent_args, dict):
            raise InvalidArgument("agent_args: expected a dict of str to str")
        for name, vals in (("labels", _labels_list(labels)),
                           ("agent_args", _labels_list(agent_args, "agent_args"))):
            arr = _lib.str_array(vals)
            if arr is not None:
                self._keep.append(arr)
                setattr(o, name, arr.ptr)
        o.force_build = 1 if force_build else 0
        self.opts = o


def _task_of(task: Union[Task, PathLike]) -> "tuple[Task, bool]":
    if isinstance(task, Task):
        return task, False
    return Task.load(task), True


def run_episode(task: Union[Task, PathLike], agent: str = "oracle",
                backend: Optional[str] = None, *, max_episode_s: Optional[float] = None,
                agent_timeout_s: Optional[float] = None, logs_dir: Optional[PathLike] = None,
                labels: Optional[Dict[str, str]] = None,
                agent_args: Optional[Dict[str, str]] = None, force_build: bool = False,
                runtime: Optional[Runtime] = None) -> EpisodeRecord:
    """Plays one whole episode of a task: resolve the image, create the
    sandbox, run the agent, verify, destroy.

    Args:
        task: a task directory or a loaded :class:`Task`.
        agent: a registered agent: "oracle" (replays solution/solve.sh),
            "nop", or another the library registers.
        backend: None = the runtime's default.
        max_episode_s: whole-episode wall clock; None = the library default.
        agent_timeout_s: overrides ``[agent].timeout_sec``.
        logs_dir: keep /logs and result.json here.
        labels: extra sandbox labels.
        agent_args: the agent's settings (``key=value``), e.g. a model name.
        force_build: build environment/ even when docker_image is present.

    Failures of the episode itself (no reward, the agent timed out, the
    image failed to build) are in the record's ``status``, not raised.
    Raises InvalidArgument (an unknown agent), NotFound / InvalidArgument
    (a bad task directory).
    """
    rt = runtime or default_runtime()
    opts = EpisodeOptions(agent=agent, backend=backend, max_episode_s=max_episode_s,
                          agent_timeout_s=agent_timeout_s, logs_dir=logs_dir, labels=labels,
                          agent_args=agent_args, force_build=force_build)
    t, owned = _task_of(task)
    res = _lib.EpisodeResultT()
    try:
        with rt.using() as rtp:
            call("sbx_episode_run", "episode", ctypes.byref(res), rtp, t.ptr,
                 ctypes.byref(opts.opts))
        try:
            return record_from(res)
        finally:
            _lib.lib().sbx_episode_result_free(ctypes.byref(res))
    finally:
        if owned:
            t.close()
