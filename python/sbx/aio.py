# SPDX-License-Identifier: MIT
"""asyncio versions of the sbx API.

Each blocking library call runs in a worker thread (the library releases the
GIL), so many sandboxes and episodes progress at once from one event loop.

Cancellation: cancelling a :meth:`Sandbox.create` fires the library's cancel
token, and a sandbox the backend still produces afterwards is destroyed, by
the library or here; cancelling :meth:`Episode.reset` aborts the episode it
still begins. A cancelled ``exec``, ``step`` or ``run_episode`` is not
interrupted: the command (bounded by its timeout) or the episode runs to its
end in its thread and its result is dropped; the sandbox stays usable.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from . import _lib
from . import episode as _episode
from . import sandbox as _sandbox
from . import task as _task
from .episode import Observation
from .runtime import Runtime, SandboxInfo
from .sandbox import ExecResult, PathLike, Stats
from .task import EpisodeRecord

T = TypeVar("T")

_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_executor_lock = threading.Lock()


def set_max_workers(n: int) -> None:
    """Worker threads for blocking calls (default 64); takes effect for calls
    made after it (calls already running finish on the old threads)."""
    from .errors import InvalidArgument
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgument("n: expected an int of threads >= 1")
    global _executor
    with _executor_lock:
        old, _executor = _executor, concurrent.futures.ThreadPoolExecutor(
            max_workers=n, thread_name_prefix="sbx-aio")
    if old is not None:
        old.shutdown(wait=False)


def shutdown(wait: bool = True) -> None:
    """Stops the worker threads, by default after the calls they run (and
    the cleanup of cancelled creates) have finished. The next call starts
    new ones."""
    global _executor
    with _executor_lock:
        old, _executor = _executor, None
    if old is not None:
        old.shutdown(wait=wait)


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(max_workers=64,
                                                              thread_name_prefix="sbx-aio")
        return _executor


async def _run(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    return await asyncio.wrap_future(_pool().submit(functools.partial(fn, *args, **kw)))


async def _run_reaped(fn: Callable[[], T], reap: Callable[[T], None],
                      on_cancel: Optional[Callable[[], None]] = None,
                      on_done: Optional[Callable[[], None]] = None) -> T:
    """Runs fn in a worker. If the caller is cancelled: calls on_cancel, and
    whatever fn still returns goes to reap (in the worker). on_done runs once
    fn has returned or will never run."""
    cf = _pool().submit(fn)
    if on_done is not None:
        cf.add_done_callback(lambda _f: on_done())
    try:
        return await asyncio.wrap_future(cf)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()

        def done(f: "concurrent.futures.Future[T]") -> None:
            if not f.cancelled() and f.exception() is None:
                reap(f.result())
        cf.add_done_callback(done)
        raise


class _Token:
    """An ``sbx_cancel`` that may be fired from the loop while a worker's
    create uses it, and freed once that create returned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ptr: Optional[int] = _lib.lib().sbx_cancel_new()

    def fire(self) -> None:
        with self._lock:
            if self.ptr:
                _lib.lib().sbx_cancel_fire(self.ptr)

    def free(self) -> None:
        with self._lock:
            p, self.ptr = self.ptr, None
        if p:
            _lib.lib().sbx_cancel_free(p)


class Sandbox:
    """An asyncio handle on a :class:`sbx.Sandbox`; make one with
    ``await Sandbox.create(image, ...)`` (same arguments)."""

    def __init__(self, sync: _sandbox.Sandbox):
        self.sync = sync  #: the blocking :class:`sbx.Sandbox` underneath

    @classmethod
    async def create(cls, image: str, **kw: Any) -> "Sandbox":
        """Creates a sandbox (arguments as :class:`sbx.Sandbox`). Cancelling
        the caller leaves no sandbox behind."""
        token = _Token()

        def make() -> _sandbox.Sandbox:
            return _sandbox.Sandbox(image, _cancel=token.ptr, **kw)

        def reap(sb: _sandbox.Sandbox) -> None:
            try:
                sb.destroy()
            except Exception:
                pass
        return cls(await _run_reaped(make, reap, token.fire, token.free))

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def backend(self) -> str:
        return self.sync.backend

    async def exec(self, cmd: Union[str, Sequence[str]], **kw: Any) -> ExecResult:
        """As :meth:`sbx.Sandbox.exec`."""
        return await _run(self.sync.exec, cmd, **kw)

    async def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        await _run(self.sync.write_file, path, data, mode)

    async def read_file(self, path: str, **kw: Any) -> bytes:
        return await _run(self.sync.read_file, path, **kw)

    async def upload(self, src: PathLike, dst: str) -> None:
        await _run(self.sync.upload, src, dst)

    async def download(self, src: str, dst: PathLike) -> None:
        await _run(self.sync.download, src, dst)

    async def set_timeout(self, seconds: float) -> None:
        await _run(self.sync.set_timeout, seconds)

    async def info(self) -> SandboxInfo:
        return await _run(self.sync.info)

    async def stats(self) -> Stats:
        return await _run(self.sync.stats)

    async def destroy(self) -> None:
        """Destroys the sandbox; finishes even if the caller is cancelled."""
        await asyncio.shield(_run(self.sync.destroy))

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()


async def run_episode(task: Union[_task.Task, PathLike], agent: str = "oracle",
                      backend: Optional[str] = None, **kw: Any) -> EpisodeRecord:
    """As :func:`sbx.run_episode`, in a worker thread."""
    return await _run(_task.run_episode, task, agent, backend, **kw)


class Episode:
    """asyncio version of :class:`sbx.Episode` (same arguments)."""

    def __init__(self, task: Union[_task.Task, PathLike], **kw: Any):
        self.sync = _episode.Episode(task, **kw)

    async def reset(self) -> str:
        """Starts a fresh episode; a cancelled reset leaves no sandbox."""
        ep = self.sync

        def reap(began: "tuple[str, int]") -> None:
            ep._abort_gen(began[1])
        return (await _run_reaped(ep._reset, reap))[0]

    async def abort(self) -> None:
        """Abandons the running episode; reset() plays another."""
        await asyncio.shield(_run(self.sync.abort))

    async def step(self, command: str, **kw: Any) -> Observation:
        return await _run(self.sync.step, command, **kw)

    async def evaluate(self) -> EpisodeRecord:
        return await _run(self.sync.evaluate)

    async def close(self) -> None:
        await asyncio.shield(_run(self.sync.close))

    async def __aenter__(self) -> "Episode":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["Sandbox", "Episode", "run_episode", "set_max_workers", "shutdown", "Runtime",
           "ExecResult", "Observation", "EpisodeRecord"]
