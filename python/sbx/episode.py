# SPDX-License-Identifier: MIT
"""Turn-by-turn episodes for trainers that run their own policy
(include/sbx/episode.h): reset -> step, step, ... -> evaluate."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Union

from . import _args, _lib
from .errors import Closed, ErrorSlot, InvalidArgument, NotSupported, call
from .runtime import Runtime, default_runtime
from .task import EpisodeOptions, EpisodeRecord, PathLike, Task, _task_of, record_from


@dataclass(frozen=True)
class Observation:
    """What one :meth:`Episode.step` gave back, as a model is fed it.

    ``output`` is stdout then stderr, capped by the library (``truncated``
    then True), "(no output)" when both were empty; ``exit_code`` is -1 when
    the command did not finish; ``done`` is True once the agent phase is over
    (its limit or the episode clock ran out): call :meth:`Episode.evaluate`.
    ``output_bytes`` is the output as the library gave it (valid UTF-8, a
    stray byte replaced by U+FFFD).
    """
    output: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0
    done: bool = False
    output_bytes: bytes = b""


class Episode:
    """One task's episode driven a command at a time.

    Args:
        task: a task directory or a loaded :class:`Task`.
        backend, max_episode_s, agent_timeout_s, logs_dir, labels, agent_args,
        force_build, runtime: as :func:`sbx.run_episode`.

    ``reset()`` starts a fresh episode (its sandbox from the task's image)
    and returns the task's instruction; ``step(cmd)`` runs one shell command
    there; ``evaluate()`` runs the task's verifier, destroys the sandbox and
    returns the :class:`EpisodeRecord` (``.reward``). ``reset()`` again
    plays another episode of the same task. ``close()`` (or leaving a
    ``with`` block) abandons a running episode and destroys its sandbox.
    Calls on one Episode are serialised.
    """

    def __init__(self, task: Union[Task, PathLike], *, backend: Optional[str] = None,
                 max_episode_s: Optional[float] = None,
                 agent_timeout_s: Optional[float] = None, logs_dir: Optional[PathLike] = None,
                 labels: Optional[Dict[str, str]] = None,
                 agent_args: Optional[Dict[str, str]] = None, force_build: bool = False,
                 runtime: Optional[Runtime] = None):
        self._ep: Optional[int] = None
        self._task: Optional[Task] = None
        self._lock = threading.RLock()
        self._kw = dict(backend=backend, max_episode_s=max_episode_s,
                        agent_timeout_s=agent_timeout_s, logs_dir=logs_dir, labels=labels,
                        agent_args=agent_args, force_build=force_build)
        EpisodeOptions(**self._kw)  # bad arguments fail here, not at reset()
        self._rt = runtime or default_runtime()
        self._task, self._owned = _task_of(task)
        self._opts: Optional[EpisodeOptions] = None
        self._done = False
        self._gen = 0
        self._rt._adopt(self)

    @property
    def task(self) -> Task:
        """The task played."""
        if self._task is None:
            raise Closed("episode: closed")
        return self._task

    @property
    def instruction(self) -> str:
        """The task's instruction (what reset() returns)."""
        return self.task.instruction

    @property
    def running(self) -> bool:
        """True between reset() and evaluate() / close()."""
        return self._ep is not None

    @staticmethod
    def supported() -> bool:
        """Whether the loaded library has the turn-by-turn API."""
        return _lib.has("sbx_episode_begin")

    def reset(self) -> str:
        """Starts a fresh episode (abandoning a running one) and returns the
        instruction. Raises what the environment failed with (NotFound for a
        missing image, ...); nothing is left behind then."""
        return self._reset()[0]

    def _reset(self) -> "tuple[str, int]":
        if not self.supported():
            raise NotSupported("episode: this libsbx has no turn-by-turn API "
                               "(sbx_episode_begin)")
        # Also returns the episode's generation, so a cancelled asyncio reset
        # aborts the episode it began and never a later one.
        with self._lock:
            self._abort()
            task = self.task
            opts = EpisodeOptions(**self._kw)  # type: ignore[arg-type]
            out = ctypes.c_void_p()
            with self._rt.using() as rtp:
                call("sbx_episode_begin", f"episode {task.name}", ctypes.byref(out), rtp,
                     task.ptr, ctypes.byref(opts.opts))
            self._ep, self._opts, self._done = out.value, opts, False
            self._gen += 1
            return task.instruction, self._gen

    def _abort_gen(self, gen: int) -> None:
        with self._lock:
            if self._gen == gen:
                self._abort()

    def _running(self) -> int:
        if self._ep is None:
            raise Closed("episode: not running (call reset() first)")
        return self._ep

    def step(self, command: str, *, timeout: Optional[float] = None) -> Observation:
        """Runs one shell command in the episode's sandbox (as the agent
        user), bounded by ``timeout`` seconds, the agent limit and the
        episode clock. Raises Timeout once the agent phase is over."""
        if not isinstance(command, str) or not command.strip() or "\0" in command:
            raise InvalidArgument("command: expected a non-empty shell command without NUL")
        t = _args.seconds(timeout, "timeout")
        with self._lock:
            ep = self._running()
            o = _lib.ObservationT()
            with self._rt.using(closing_ok=True):
                call("sbx_episode_turn", "step", ctypes.byref(o), ep, command.encode(), t)
            try:
                raw = ctypes.string_at(o.output, o.output_len) if o.output else b""
                obs = Observation(output=raw.decode("utf-8", "replace"), exit_code=o.exit_code,
                                  timed_out=bool(o.timed_out), truncated=bool(o.truncated),
                                  seconds=o.seconds, done=bool(o.done), output_bytes=raw)
            finally:
                _lib.lib().sbx_observation_free(ctypes.byref(o))
            self._done = obs.done
            return obs

    def evaluate(self) -> EpisodeRecord:
        """Ends the agent phase, runs the task's verifier, destroys the
        sandbox and returns the record (``.reward``, ``.status``, ...)."""
        with self._lock:
            ep = self._running()
            self._ep = None
            res = _lib.EpisodeResultT()
            slot = ErrorSlot()
            with self._rt.using(closing_ok=True):
                rc = _lib.lib().sbx_episode_end(ctypes.byref(res), ep, slot.ref)
            self._opts = None
            slot.check(rc, "evaluate")
            try:
                return record_from(res)
            finally:
                _lib.lib().sbx_episode_result_free(ctypes.byref(res))

    def _abort(self) -> None:
        ep, self._ep = self._ep, None
        if ep is not None:
            with self._rt.using(closing_ok=True):
                _lib.lib().sbx_episode_abort(ep)
        self._opts = None

    def abort(self) -> None:
        """Abandons a running episode (its sandbox destroyed, no verifier);
        the Episode stays usable: reset() plays another. No-op when none runs."""
        with self._lock:
            self._abort()

    def close(self) -> None:
        """Abandons a running episode (its sandbox destroyed, no verifier)
        and frees the task if this Episode loaded it. Idempotent."""
        with self._lock:
            self._abort()
            t, self._task = self._task, None
            if t is not None and self._owned:
                t.close()

    _on_runtime_close = close

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
