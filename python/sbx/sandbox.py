# SPDX-License-Identifier: MIT
"""Sandboxes: create, exec, files, timeout, destroy."""
from __future__ import annotations

import ctypes
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import _args, _lib
from .errors import Closed, ErrorSlot, InvalidArgument, call
from .runtime import Runtime, SandboxInfo, _info_row, _labels_list, default_runtime, resolve_backend

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Stats:
    """What :meth:`Sandbox.stats` sampled: CPU seconds used by everything in
    the sandbox, memory charged to it (page cache included, and of it), the
    bytes its writable layer holds and what that layer may grow to (0 =
    unknown)."""
    cpu_s: float
    mem_bytes: int
    mem_cache_bytes: int
    disk_bytes: int
    disk_total_bytes: int


@dataclass(frozen=True)
class ExecResult:
    """What one :meth:`Sandbox.exec` gave back.

    ``exit_code`` is the exit status, or 128 + signal when signalled (then
    ``signal`` is set); ``timed_out`` is True when ``timeout`` killed it.
    """
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    signal: int = 0
    seconds: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """exit_code == 0 and not timed out."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")

    text = stdout_text


_SB = object()  # marks where _call passes the sandbox handle


class _Handle:
    """An ``sbx_sandbox *`` freed only once no call is using it, so a destroy
    (or a cancelled asyncio call) never frees it under a running call."""

    def __init__(self, ptr: int):
        self._lock = threading.Lock()
        self._ptr: Optional[int] = ptr
        self._busy = 0
        self._closed = False

    def acquire(self) -> int:
        with self._lock:
            if self._closed or not self._ptr:
                raise Closed("sandbox: already destroyed")
            self._busy += 1
            return self._ptr

    def release(self) -> None:
        with self._lock:
            self._busy -= 1
            p = self._take_if_idle()
        if p:
            _lib.lib().sbx_sandbox_free(p)

    def _take_if_idle(self) -> Optional[int]:
        if self._closed and self._busy == 0 and self._ptr:
            p, self._ptr = self._ptr, None
            return p
        return None

    def close(self) -> bool:
        """Marks it closed; False if it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            p = self._take_if_idle()
        if p:
            _lib.lib().sbx_sandbox_free(p)
        return True

    @property
    def closed(self) -> bool:
        return self._closed


def _spec_opts(image: str, *, cpus: Optional[float] = None,
               memory: Union[None, int, str] = "512M", storage: Union[None, int, str] = None,
               network: str = "none", env: Optional[Dict[str, str]] = None,
               ttl: Optional[float] = None, labels: Optional[Dict[str, str]] = None,
               backend: Optional[str] = None, workdir: Optional[str] = None,
               user: Optional[str] = None) -> Tuple["_lib.SandboxOpts", List[object]]:
    """The sandbox spec struct (and the arrays it points into, to keep alive)."""
    opts = _lib.SandboxOpts(version=1)
    keep = []  # arrays the opts point into, alive for the call
    opts.image = _args.text(image, "image")
    opts.provider = _lib.cstr(resolve_backend(backend)) if backend else None
    if cpus is not None:
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not cpus > 0:
            raise InvalidArgument("cpus: expected a number of cores > 0")
        opts.cpus = float(cpus)
    opts.memory_mb = _args.size_mb(memory, "memory")
    opts.storage_mb = _args.size_mb(storage, "storage")
    net = ctypes.c_int()
    if not isinstance(network, str) or \
            _lib.lib().sbx_network_parse(ctypes.byref(net), network.encode()) < 0:
        raise InvalidArgument(f"network: expected 'none', 'internet' or 'host', "
                              f"got {network!r}")
    opts.network = net.value
    for field, vals in (("env", _args.env_list(env)), ("labels", _labels_list(labels))):
        arr = _lib.str_array(vals)
        if arr is not None:
            keep.append(arr)
            setattr(opts, field, arr.ptr)
    ttl_s = _args.seconds(ttl, "ttl")
    if ttl_s >= 2 ** 32:
        raise InvalidArgument("ttl: too large")
    opts.ttl_s = int(ttl_s + 0.999) if ttl_s else 0
    opts.workdir = _args.text(workdir, "workdir")
    opts.user = _args.text(user, "user")
    return opts, keep


class Sandbox:
    """One sandbox, created by the constructor and destroyed by
    :meth:`destroy` (or leaving a ``with`` block, or garbage collection).

    Args:
        image: image name (local store) or template (remote backends).
        cpus: CPU quota in cores; None = the backend's default.
        memory: memory limit, ``"512M"``, ``"2G"`` or an int of MiB; None = none.
        storage: cap on the writable layer, as ``memory``; None = the default.
        network: ``"none"`` (loopback only), ``"internet"`` or ``"host"``.
        env: extra environment of every command.
        ttl: destroy after this many seconds; None = never.
        labels: labels for listing and garbage collection.
        backend: ``"local"``, ``"e2b"``, ...; None = the runtime's default.
        workdir: default working directory; None = the image's.
        user: default user; None = the image's.
        create_timeout: give up creating after this many seconds (Timeout).
        runtime: None = :func:`sbx.default_runtime`.

    Raises:
        InvalidArgument, NotFound (no such image), Throttled, Timeout, SbxError.

    A sandbox created here and garbage collected while still alive is
    destroyed (with a ResourceWarning), as are those still open at exit.

    The methods may be called from several threads at once.
    """

    def __init__(self, image: str, *, cpus: Optional[float] = None,
                 memory: Union[None, int, str] = "512M", storage: Union[None, int, str] = None,
                 network: str = "none", env: Optional[Dict[str, str]] = None,
                 ttl: Optional[float] = None, labels: Optional[Dict[str, str]] = None,
                 backend: Optional[str] = None, workdir: Optional[str] = None,
                 user: Optional[str] = None, create_timeout: Optional[float] = None,
                 runtime: Optional[Runtime] = None, _cancel: Optional[int] = None):
        self._handle: Optional[_Handle] = None
        opts, keep = _spec_opts(image, cpus=cpus, memory=memory, storage=storage,
                                network=network, env=env, ttl=ttl, labels=labels,
                                backend=backend, workdir=workdir, user=user)
        ctl = _lib.CreateCtl(version=1, cancel=_cancel,
                             timeout_s=_args.seconds(create_timeout, "create_timeout"))
        out = ctypes.c_void_p()
        rt = runtime or default_runtime()  # after the checks: bad arguments need none
        with rt.using() as rtp:
            call("sbx_sandbox_create_ex", "create sandbox", ctypes.byref(out), rtp,
                 ctypes.byref(opts), ctypes.byref(ctl))
            self._init(rt, out.value, owned=True)  # type: ignore[arg-type]

    def _init(self, rt: Runtime, ptr: int, owned: bool = False) -> None:
        # Runs inside rt.using(): the runtime cannot be freed before the
        # sandbox is recorded as its child (or destroyed, if it is closing).
        self._runtime = rt
        self._owned = owned  # made here: destroyed when garbage collected
        self._handle = _Handle(ptr)
        lib = _lib.lib()
        self._id = (lib.sbx_sandbox_id(ptr) or b"").decode()
        self._backend = (lib.sbx_sandbox_provider(ptr) or b"").decode()
        try:
            rt._adopt(self)
        except Closed:
            self.destroy()
            raise

    @classmethod
    def attach(cls, sandbox_id: str, *, backend: Optional[str] = None,
               runtime: Optional[Runtime] = None) -> "Sandbox":
        """Opens an existing sandbox by id (e.g. one made by ``sbx create``).
        Raises NotFound when there is none. ``destroy()`` destroys it; a
        handle merely dropped leaves it running (unlike one created here)."""
        rt = runtime or default_runtime()
        out = ctypes.c_void_p()
        self = cls.__new__(cls)
        self._handle = None
        with rt.using() as rtp:
            call("sbx_sandbox_open", f"open sandbox {sandbox_id}", ctypes.byref(out), rtp,
                 _lib.cstr(resolve_backend(backend)) if backend else None,
                 _args.text(sandbox_id, "sandbox_id"))
            self._init(rt, out.value)  # type: ignore[arg-type]
        return self

    def fork(self, n: int = 1) -> List["Sandbox"]:
        """Forks this sandbox's file system into ``n`` new sandboxes (GRPO: one
        prefix, G rollouts). Each child starts from the files as they are now,
        with this sandbox's image, limits and environment and a new id;
        processes are not copied, and this sandbox keeps running. Writes in a
        child are invisible to this sandbox and to the other children. The
        children are owned like created sandboxes (destroyed when garbage
        collected). Raises InvalidArgument (n), SbxError (e.g. a writable
        layer in memory: the local backend needs its disk layer)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1024:
            raise InvalidArgument(f"n: expected an int from 1 to 1024, got {n!r}")
        arr = (ctypes.c_void_p * n)()
        self._call("sbx_sandbox_fork", f"fork sandbox {self._id}", arr, n, _SB, None)
        kids: List[Sandbox] = []
        rt = self._runtime
        with rt.using():
            for i, p in enumerate(arr):
                kid = Sandbox.__new__(Sandbox)
                kid._handle = None
                try:
                    kid._init(rt, p, owned=True)  # type: ignore[arg-type]
                except Closed:
                    for q in arr[i + 1:]:  # the runtime is closing: leave nothing behind
                        _lib.lib().sbx_sandbox_destroy(q, None)
                        _lib.lib().sbx_sandbox_free(q)
                    raise
                kids.append(kid)
        return kids

    @property
    def id(self) -> str:
        """The sandbox id."""
        return self._id

    @property
    def backend(self) -> str:
        """The backend (provider) it runs on."""
        return self._backend

    @property
    def closed(self) -> bool:
        """True once destroyed (or closed)."""
        return self._handle is None or self._handle.closed

    def _call(self, fn_name: str, what: str, *args: object) -> int:
        if self._handle is None:
            raise Closed("sandbox: already destroyed")
        with self._runtime.using(closing_ok=True):
            return self._call_held(fn_name, what, *args)

    def _call_held(self, fn_name: str, what: str, *args: object) -> int:
        assert self._handle is not None
        p = self._handle.acquire()
        try:
            # The handle goes where _SB stands, else first.
            if any(a is _SB for a in args):
                return call(fn_name, what, *(p if a is _SB else a for a in args))
            return call(fn_name, what, p, *args)
        finally:
            self._handle.release()

    def exec(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
             env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             user: Optional[str] = None, stdin: Union[None, bytes, str] = None,
             output_max: Optional[int] = None) -> ExecResult:
        """Runs a command and waits for it.

        Args:
            cmd: a shell command (``/bin/sh -c``) or an argv list.
            timeout: kill the command's whole tree after this many seconds
                (the result then has ``timed_out`` True); None = no limit.
            env: extra variables on top of the sandbox's.
            cwd: working directory; None = the sandbox's.
            user: user to run as; None = the sandbox's.
            stdin: bytes fed to stdin, then EOF; None = /dev/null.
            output_max: bytes kept per stream (the rest is dropped and the
                ``*_truncated`` flag set); None = 16 MiB.

        A command that cannot start gives exit code 127 and a message on
        stderr. Raises NotFound when the sandbox is gone.
        """
        c = _args.command(cmd)
        opts = _lib.ExecOpts(version=1, stdout_fd=-1, stderr_fd=-1, stdin_fd=-1)
        keep = []
        if isinstance(c, str):
            opts.shell = c.encode()
        else:
            argv = _lib.StrArray(c)
            keep.append(argv)
            opts.argv = argv.ptr
        envs = _lib.str_array(_args.env_list(env))
        if envs is not None:
            keep.append(envs)
            opts.env = envs.ptr
        opts.cwd = _args.text(cwd, "cwd")
        opts.user = _args.text(user, "user")
        if stdin is not None:
            buf = _args.data(stdin, "stdin")
            cbuf = ctypes.create_string_buffer(buf, len(buf))
            keep.append(cbuf)
            opts.stdin_data = ctypes.cast(cbuf, ctypes.c_void_p)
            opts.stdin_len = len(buf)
        opts.timeout_s = _args.seconds(timeout, "timeout")
        if output_max is not None:
            if isinstance(output_max, bool) or not isinstance(output_max, int) or output_max <= 0:
                raise InvalidArgument("output_max: expected an int of bytes > 0")
            opts.output_max = output_max
        res = _lib.ExecResultT()
        self._call("sbx_sandbox_exec", "exec", ctypes.byref(res), _SB, ctypes.byref(opts))
        try:
            return ExecResult(
                exit_code=res.exit_code,
                stdout=ctypes.string_at(res.out, res.out_len) if res.out else b"",
                stderr=ctypes.string_at(res.err, res.err_len) if res.err else b"",
                timed_out=bool(res.timed_out), signal=res.signal, seconds=res.seconds,
                stdout_truncated=bool(res.out_truncated),
                stderr_truncated=bool(res.err_truncated))
        finally:
            _lib.lib().sbx_exec_result_free(ctypes.byref(res))

    def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        """Writes a file (str is UTF-8 encoded), creating parent directories."""
        buf = _args.data(data, "data")
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise InvalidArgument("mode: expected permission bits like 0o644")
        self._call("sbx_sandbox_write_file", f"write {path}", _args.text(path, "path"), buf,
                   len(buf), mode)

    def read_file(self, path: str, *, max_bytes: Optional[int] = None) -> bytes:
        """Reads a whole regular file. Raises NotFound, TooLarge (over
        ``max_bytes``; None = 1 GiB), InvalidArgument (a directory, FIFO, ...)."""
        if max_bytes is not None and (isinstance(max_bytes, bool) or
                                      not isinstance(max_bytes, int) or max_bytes <= 0):
            raise InvalidArgument("max_bytes: expected an int of bytes > 0")
        data = ctypes.c_void_p()
        n = ctypes.c_size_t()
        self._call("sbx_sandbox_read_file", f"read {path}", ctypes.byref(data), ctypes.byref(n),
                   _SB, _args.text(path, "path"), max_bytes or 0)
        try:
            return ctypes.string_at(data.value, n.value) if data.value else b""
        finally:
            _lib.free(data.value)

    def upload(self, src: PathLike, dst: str) -> None:
        """Copies a host file or directory tree into the sandbox at ``dst``."""
        self._call("sbx_sandbox_upload", "upload", _args.text(os.fspath(src), "src"),
                   _args.text(dst, "dst"))

    def download(self, src: str, dst: PathLike) -> None:
        """Copies a file or tree out of the sandbox to host path ``dst``."""
        self._call("sbx_sandbox_download", "download", _args.text(src, "src"),
                   _args.text(os.fspath(dst), "dst"))

    def set_timeout(self, seconds: float) -> None:
        """Sets the time to live from now; 0 = never expire."""
        s = _args.seconds(seconds, "seconds", allow_zero=True)
        if s >= 2 ** 32:
            raise InvalidArgument("seconds: too large")
        self._call("sbx_sandbox_set_timeout", "set timeout", int(s + 0.999) if s else 0)

    def info(self) -> SandboxInfo:
        """This sandbox's row of :meth:`Runtime.list_sandboxes`, without listing the others."""
        out = ctypes.POINTER(_lib.SandboxInfoT)()
        self._call("sbx_sandbox_info_get", "info", ctypes.byref(out), _SB)
        try:
            return _info_row(out[0])
        finally:
            _lib.lib().sbx_sandbox_info_free(out, 1)

    def stats(self) -> Stats:
        """Its resource use now (also while paused). NotSupported where the
        backend cannot say."""
        st = _lib.StatsT()
        self._call("sbx_sandbox_stats", "stats", ctypes.byref(st), _SB)
        return Stats(cpu_s=st.cpu_s, mem_bytes=st.mem_bytes, mem_cache_bytes=st.mem_cache_bytes,
                     disk_bytes=st.disk_bytes, disk_total_bytes=st.disk_total_bytes)

    def destroy(self) -> None:
        """Destroys the sandbox (processes, mounts, files). Idempotent; other
        methods then raise Closed."""
        h = self._handle
        if h is None or h.closed:
            return
        with self._runtime.using(closing_ok=True):
            try:
                p = h.acquire()
            except Closed:
                return
            slot = ErrorSlot()
            try:
                rc = _lib.lib().sbx_sandbox_destroy(p, slot.ref)
            finally:
                h.release()
                h.close()
        slot.check(rc, f"destroy sandbox {self._id}")

    close = destroy

    def _on_runtime_close(self) -> None:
        # Sandboxes made here die with their runtime; attached ones live on.
        if self._owned:
            self.destroy()
        else:
            self._release()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def __repr__(self) -> str:
        state = "destroyed" if self.closed else "running"
        return f"<sbx.Sandbox {self._id} on {self._backend} ({state})>"

    def _release(self) -> None:
        """Frees the handle, leaving the sandbox as it is."""
        h = self._handle
        if h is not None and not h.closed:
            with self._runtime.using(closing_ok=True):
                h.close()

    def __del__(self) -> None:
        h = getattr(self, "_handle", None)
        if h is not None and not h.closed and not getattr(self, "_owned", False):
            try:
                self._release()
            except Exception:
                pass
        elif h is not None and not h.closed:
            try:
                warnings.warn(f"sbx: sandbox {self._id} was not destroyed; destroying it",
                              ResourceWarning, stacklevel=2)
                self.destroy()
            except Exception:
                pass
