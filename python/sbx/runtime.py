# SPDX-License-Identifier: MIT
"""The runtime: where sandbox state and images live, and the default backend.

A process normally uses one runtime, :func:`default_runtime`, made on first
use from ``$SBX_STATE_DIR`` / ``$SBX_IMAGE_DIR`` (else /run/sbx and
/var/lib/sbx/images). Make a :class:`Runtime` of your own for private stores
(tests, several image stores in one process) and pass it as ``runtime=``.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

from . import _lib
from .errors import Closed, ErrorSlot, InvalidArgument, call


@dataclass(frozen=True)
class SandboxInfo:
    """One sandbox as listed by :meth:`Runtime.list_sandboxes`."""
    id: str
    provider: str
    image: str
    state: str
    labels: Dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    expires_at: float = 0.0
    leaked: bool = False
    pid: int = 0  #: local: the init's pid on the host (0 elsewhere)


def _info_row(r: "_lib.SandboxInfoT") -> SandboxInfo:
    labs = dict(s.split("=", 1) if "=" in s else (s, "") for s in _lib.read_strv(r.labels))
    return SandboxInfo(id=_lib.pystr(r.id) or "", provider=_lib.pystr(r.provider) or "",
                       image=_lib.pystr(r.image) or "", state=_lib.pystr(r.state) or "",
                       labels=labs, created_at=r.created_at, expires_at=r.expires_at,
                       leaked=bool(r.leaked), pid=int(r.pid))


def _labels_list(labels: Optional[Dict[str, str]], what: str = "labels") -> Optional[List[str]]:
    from .errors import InvalidArgument
    if labels is None:
        return None
    if not isinstance(labels, dict):
        raise InvalidArgument(f"{what}: expected a dict of str to str")
    out = []
    for k, v in labels.items():
        if not isinstance(k, str) or not k or "=" in k or "\0" in k:
            raise InvalidArgument(f"{what}: key {k!r} must be a non-empty str without '='")
        if not isinstance(v, str) or "\0" in v:
            raise InvalidArgument(f"{what}: the value of {k!r} must be a str without NUL")
        out.append(f"{k}={v}")
    return out


class Runtime:
    """A libsbx runtime (``sbx_runtime``).

    Args:
        state_dir: sandbox state directory; None = ``$SBX_STATE_DIR`` or /run/sbx.
        image_dir: image store; None = ``$SBX_IMAGE_DIR`` or /var/lib/sbx/images.
        backend: the default backend for sandboxes made through this runtime;
            None = ``$SBX_BACKEND``, else ``$OPENENV_SANDBOX_BACKEND``, else local.

    ``close()`` destroys the sandboxes still open through it, then waits for
    creates abandoned by a cancel to clean up, then frees the runtime.
    """

    def __init__(self, state_dir: Optional[str] = None, image_dir: Optional[str] = None,
                 backend: Optional[str] = None):
        self._cond = threading.Condition()
        self._busy = 0  # library calls using the runtime right now
        self._closing = False
        self._ptr: Optional[int] = None
        self._children: "weakref.WeakSet[object]" = weakref.WeakSet()
        self._backend = resolve_backend(backend)
        # Relative paths are taken from the current directory, as everywhere
        # in Python (the library wants absolute ones).
        state_dir = os.path.abspath(os.fspath(state_dir)) if state_dir else None
        image_dir = os.path.abspath(os.fspath(image_dir)) if image_dir else None
        opts = _lib.RuntimeOpts(version=1, state_dir=_lib.cstr(state_dir),
                                image_dir=_lib.cstr(image_dir),
                                default_provider=_lib.cstr(self._backend), log_level=0)
        ptr = ctypes.c_void_p()
        call("sbx_runtime_new", "runtime", ctypes.byref(ptr), ctypes.byref(opts))
        self._ptr: Optional[int] = ptr.value
        _all.add(self)

    @property
    def ptr(self) -> int:
        p = self._ptr
        if not p or self._closing:
            raise Closed("runtime: already closed")
        return p

    @contextlib.contextmanager
    def using(self, closing_ok: bool = False) -> Iterator[int]:
        """The runtime pointer, kept from being freed until the block ends
        (close() waits for every such block)."""
        with self._cond:
            if not self._ptr or (self._closing and not closing_ok):
                raise Closed("runtime: already closed")
            self._busy += 1
            p = self._ptr
        try:
            yield p
        finally:
            with self._cond:
                self._busy -= 1
                if self._busy == 0:
                    self._cond.notify_all()

    @property
    def backend(self) -> str:
        """The canonical name of this runtime's default backend."""
        return self._backend

    @property
    def state_dir(self) -> str:
        return _lib.pystr(_lib.lib().sbx_runtime_state_dir(self.ptr)) or ""

    @property
    def image_dir(self) -> str:
        return _lib.pystr(_lib.lib().sbx_runtime_image_dir(self.ptr)) or ""

    def _adopt(self, child: object) -> None:
        """Records a sandbox or episode for close(); Closed once closing."""
        with self._cond:
            if self._closing:
                raise Closed("runtime: closing")
            self._children.add(child)

    def list_sandboxes(self, labels: Optional[Dict[str, str]] = None,
                       backend: Optional[str] = None) -> List[SandboxInfo]:
        """The sandboxes whose labels include every item of ``labels``."""
        filt = _lib.str_array(_labels_list(labels))
        out = ctypes.POINTER(_lib.SandboxInfoT)()
        n = ctypes.c_size_t()
        with self.using() as p:
            call("sbx_sandbox_list", "list sandboxes", ctypes.byref(out), ctypes.byref(n), p,
                 _lib.cstr(resolve_backend(backend) if backend else self._backend),
                 filt.ptr if filt else None)
        try:
            rows = [_info_row(out[i]) for i in range(n.value)]
            return rows
        finally:
            _lib.lib().sbx_sandbox_info_free(out, n.value)

    def has_image(self, name: str) -> bool:
        """Whether the local image store holds image ``name``."""
        img = ctypes.c_void_p()
        slot = ErrorSlot()
        with self.using() as p:
            rc = _lib.lib().sbx_image_get(ctypes.byref(img), p, name.encode(), slot.ref)
        if rc < 0:
            slot.take(rc, "image")
            return False
        _lib.lib().sbx_image_free(img)
        return True

    def import_image(self, name: str, src: str) -> None:
        """Imports ``src`` (a rootfs directory or tarball, an OCI layout or a
        ``docker save`` archive) into the local store as image ``name``."""
        with self.using() as p:
            call("sbx_image_import", f"import image {name}", None, p, name.encode(),
                 str(src).encode())

    def pool(self, image: str, size: int, *, wait: Optional[float] = None,
             **spec: object) -> None:
        """Keeps ``size`` sandboxes of this spec (the keywords of ``Sandbox``:
        cpus, memory, storage, network, env, ttl, labels, backend, workdir,
        user) created ahead; a ``Sandbox(image, runtime=this, **spec)`` of the
        same spec then starts from one in well under a millisecond. Labels
        are part of the match; the TTL is the taker's. Refilled in the
        background; idle ones are destroyed by ``close()``. With ``wait``,
        blocks up to that many seconds until the pool is full (Timeout)."""
        from .sandbox import _spec_opts  # sandbox imports this module
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1024:
            raise InvalidArgument("size: expected a number of sandboxes from 1 to 1024")
        opts, keep = _spec_opts(image, **spec)  # type: ignore[arg-type]
        po = _lib.PoolOpts(version=1, spec=ctypes.pointer(opts), size=size, task=None)
        with self.using() as p:
            call("sbx_pool_add", f"pool {image}", p, ctypes.byref(po))
            if wait is not None:
                call("sbx_pool_wait", f"pool {image}", p, float(wait))
        del keep

    def pool_ready(self) -> int:
        """Sandboxes ready in this runtime's pools now."""
        with self.using() as p:
            return int(_lib.lib().sbx_pool_ready(p))

    def close(self) -> None:
        """Destroys the open sandboxes created through it (attached ones are
        only released) and abandons its running episodes, waits for calls still using it (and for creates the library
        abandoned on a cancel), then frees it. Idempotent."""
        with self._cond:
            if self._closing or not self._ptr:
                return
            self._closing = True
            children = list(self._children)
        for c in children:
            try:
                c._on_runtime_close()  # type: ignore[attr-defined]
            except Exception:
                pass
        with self._cond:
            while self._busy:
                self._cond.wait()
            p, self._ptr = self._ptr, None
        if p:
            _lib.lib().sbx_runtime_free(p)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def resolve_backend(name: Optional[str]) -> str:
    """The canonical backend name for ``name`` (None: ``$SBX_BACKEND``, ...)."""
    from .errors import InvalidArgument
    if name is not None and (not isinstance(name, str) or "\0" in name):
        raise InvalidArgument("backend: expected a backend name (str)")
    out = ctypes.c_void_p()
    call("sbx_backend_resolve", "backend", ctypes.byref(out), _lib.cstr(name))
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        _lib.free(out.value)


_all: "weakref.WeakSet[Runtime]" = weakref.WeakSet()
_default: Optional[Runtime] = None
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
    """The process-wide runtime, made on first use."""
    global _default
    with _default_lock:
        if _default is None or _default._ptr is None:
            _default = Runtime()
        return _default


def set_default_runtime(rt: Optional[Runtime]) -> None:
    """Makes ``rt`` the runtime used when no ``runtime=`` is given (None: make
    a fresh one on next use). The previous default is not closed."""
    global _default
    with _default_lock:
        _default = rt


@atexit.register
def _close_all() -> None:
    # Sandboxes still open at exit are destroyed, not left to `sbx gc`.
    for rt in list(_all):
        rt.close()
