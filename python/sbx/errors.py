# SPDX-License-Identifier: MIT
"""Exceptions raised by the sbx package, mapped from the library's error codes.

Every library failure becomes an :class:`SbxError` (or a subclass picked by
its code) carrying the library's one-line message. The library redacts
secrets from its messages, and this package never adds a value it was given
(an environment value, file contents, a key) to one.
"""
from __future__ import annotations

import ctypes
import errno as _errno
from typing import Dict, Optional, Type

from . import _lib


class SbxError(Exception):
    """A failed sbx call.

    Attributes:
        code: the library's negative errno-style code (e.g. ``-errno.ENOENT``),
            0 for errors found before calling the library.
        code_name: that code's name (``"ENOENT"``), or ``""``.
        sys_errno: errno of the failing system call, 0 if none.
        http_status: HTTP status from a remote provider, 0 if none.
        provider: the provider the error came from, or None.
        message: the message (also ``str(exc)``).
    """

    def __init__(self, message: str, code: int = 0, *, sys_errno: int = 0,
                 http_status: int = 0, provider: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.sys_errno = sys_errno
        self.http_status = http_status
        self.provider = provider

    @property
    def code_name(self) -> str:
        if not self.code:
            return ""
        name = (_lib.lib().sbx_error_code_name(self.code) or b"").decode()
        if name in ("", "EUNKNOWN"):  # the library names the codes it returns most
            name = _errno.errorcode.get(-self.code, name)
        return name


class NotFound(SbxError, LookupError):
    """No such image, task file, sandbox, path or provider (ENOENT, ESRCH)."""


class InvalidArgument(SbxError, ValueError):
    """A bad argument or spec (EINVAL, E2BIG, EISDIR, ENOTDIR); names the argument."""


class Timeout(SbxError, TimeoutError):
    """A deadline passed (ETIMEDOUT)."""


class Throttled(SbxError):
    """The provider refused for now (EAGAIN, HTTP 429): retry later."""


class Cancelled(SbxError):
    """The operation was cancelled (ECANCELED)."""


class PermissionDenied(SbxError, PermissionError):
    """Not allowed (EACCES, EPERM)."""


class AlreadyExists(SbxError):
    """Already there (EEXIST, EALREADY)."""


class NotSupported(SbxError):
    """The provider or library cannot do this (ENOSYS, EOPNOTSUPP)."""


class CredentialsMissing(SbxError):
    """A backend's key is not configured (ENOKEY); the message says how."""


class TooLarge(SbxError):
    """Over a size limit (EFBIG, ENOSPC, EMSGSIZE)."""


class Closed(SbxError):
    """The sandbox or episode was already destroyed or closed."""


_BY_CODE: Dict[int, Type[SbxError]] = {
    _errno.ENOENT: NotFound, _errno.ESRCH: NotFound,
    _errno.EINVAL: InvalidArgument, _errno.E2BIG: InvalidArgument,
    _errno.EISDIR: InvalidArgument, _errno.ENOTDIR: InvalidArgument,
    _errno.ELOOP: InvalidArgument,
    _errno.ETIMEDOUT: Timeout,
    _errno.EAGAIN: Throttled,
    _errno.ECANCELED: Cancelled,
    _errno.EACCES: PermissionDenied, _errno.EPERM: PermissionDenied,
    _errno.EEXIST: AlreadyExists, _errno.EALREADY: AlreadyExists,
    _errno.ENOSYS: NotSupported, _errno.EOPNOTSUPP: NotSupported,
    _errno.ENOKEY: CredentialsMissing,
    _errno.EFBIG: TooLarge, _errno.ENOSPC: TooLarge, _errno.EMSGSIZE: TooLarge,
}


def class_for(code: int) -> Type[SbxError]:
    """The exception class for a negative library code."""
    return _BY_CODE.get(-code, SbxError)


def from_code(code: int, message: str, **kw: object) -> SbxError:
    return class_for(code)(message, code, **kw)  # type: ignore[arg-type]


class ErrorSlot:
    """An ``sbx_error **`` to pass last to a library call.

    ``check(rc, what)`` raises the mapped exception for a negative ``rc`` and
    frees the library's error either way.
    """

    def __init__(self) -> None:
        self.p = ctypes.POINTER(_lib.SbxErrorT)()

    @property
    def ref(self) -> object:
        return ctypes.byref(self.p)

    def take(self, rc: int, what: str) -> SbxError:
        msg, kw = f"{what}: {_errno.errorcode.get(-rc, rc)}", {}
        if self.p:
            e = self.p.contents
            if e.msg:
                msg = e.msg.decode("utf-8", "replace")
            kw = dict(sys_errno=e.sys_errno, http_status=e.http_status,
                      provider=_lib.pystr(e.provider))
            _lib.lib().sbx_error_free(self.p)
            self.p = ctypes.POINTER(_lib.SbxErrorT)()
        return from_code(rc, msg, **kw)

    def check(self, rc: int, what: str) -> int:
        if rc < 0:
            raise self.take(rc, what)
        if self.p:  # a warning-level error left on success: not ours to keep
            _lib.lib().sbx_error_free(self.p)
            self.p = ctypes.POINTER(_lib.SbxErrorT)()
        return rc


def call(fn_name: str, what: str, *args: object) -> int:
    """Calls ``fn_name(*args, &err)``; raises the mapped exception on failure."""
    slot = ErrorSlot()
    rc = getattr(_lib.lib(), fn_name)(*args, slot.ref)
    return slot.check(rc, what)
