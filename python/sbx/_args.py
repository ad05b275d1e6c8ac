# SPDX-License-Identifier: MIT
"""Argument checks shared by the package: each failure names the argument."""
from __future__ import annotations

import math
import os
import re
from typing import Dict, List, Optional, Sequence, Union

from .errors import InvalidArgument

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)
_MB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}


def size_mb(value: Union[None, int, str], what: str) -> int:
    """``"512M"``, ``"2G"``, ``"1.5GiB"`` or an int of MiB -> MiB (0 for None)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise InvalidArgument(f"{what}: expected a size like '512M' or an int of MiB")
    if isinstance(value, int):
        mb = float(value)
    elif isinstance(value, str):
        m = _SIZE.match(value)
        if not m:
            raise InvalidArgument(f"{what}: expected a size like '512M', '2G' or an int "
                                  f"of MiB, got {value!r}")
        mb = float(m.group(1)) * _MB[m.group(2).lower()]
    else:
        raise InvalidArgument(f"{what}: expected a size like '512M' or an int of MiB")
    if mb <= 0 or mb >= 2 ** 32:
        raise InvalidArgument(f"{what}: must be more than 0 and less than 4 PiB")
    return int(math.ceil(mb))


def seconds(value: Union[None, int, float], what: str, *, allow_zero: bool = False) -> float:
    """A positive number of seconds (None -> 0, meaning none)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{what}: expected a number of seconds")
    v = float(value)
    if math.isnan(v) or math.isinf(v) or v < 0 or (v == 0 and not allow_zero):
        raise InvalidArgument(f"{what}: expected a finite number of seconds "
                              f"{'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


def text(value: Optional[str], what: str, *, empty: bool = False) -> Optional[bytes]:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)  # type: ignore[assignment]
    if not isinstance(value, str):
        raise InvalidArgument(f"{what}: expected a str")
    if "\0" in value or (not value and not empty):
        raise InvalidArgument(f"{what}: expected a non-empty str without NUL")
    return value.encode()


def env_list(env: Optional[Dict[str, str]], what: str = "env") -> Optional[List[str]]:
    """A dict of variables -> ``["K=V", ...]``; values are never echoed."""
    if env is None:
        return None
    if not isinstance(env, dict):
        raise InvalidArgument(f"{what}: expected a dict of str to str")
    out = []
    for k, v in env.items():
        if not isinstance(k, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise InvalidArgument(f"{what}: {k!r} is not a variable name")
        if not isinstance(v, str) or "\0" in v:
            raise InvalidArgument(f"{what}: the value of {k} must be a str without NUL")
        out.append(f"{k}={v}")
    return out


def command(cmd: Union[str, Sequence[str]]) -> Union[str, List[str]]:
    """A shell command (str) or an argv (a non-empty list of str)."""
    if isinstance(cmd, str):
        if not cmd.strip() or "\0" in cmd:
            raise InvalidArgument("cmd: expected a non-empty shell command without NUL")
        return cmd
    if isinstance(cmd, (list, tuple)) and cmd and all(isinstance(a, str) for a in cmd):
        if any("\0" in a for a in cmd) or not cmd[0]:
            raise InvalidArgument("cmd: argv items must be str without NUL, argv[0] non-empty")
        return list(cmd)
    raise InvalidArgument("cmd: expected a shell command (str) or an argv (list of str)")


def data(value: Union[bytes, bytearray, memoryview, str], what: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"{what}: expected bytes or str")
