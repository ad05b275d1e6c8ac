# SPDX-License-Identifier: MIT
"""Exception mapping from the library's codes, and no secret in messages."""
import errno
import pickle

import pytest

import sbx
from sbx import errors


@pytest.mark.parametrize("code, cls, base", [
    (errno.ENOENT, sbx.NotFound, LookupError), (errno.ESRCH, sbx.NotFound, LookupError),
    (errno.EINVAL, sbx.InvalidArgument, ValueError), (errno.E2BIG, sbx.InvalidArgument, ValueError),
    (errno.ETIMEDOUT, sbx.Timeout, TimeoutError), (errno.EAGAIN, sbx.Throttled, sbx.SbxError),
    (errno.ECANCELED, sbx.Cancelled, sbx.SbxError),
    (errno.EACCES, sbx.PermissionDenied, PermissionError),
    (errno.EEXIST, sbx.AlreadyExists, sbx.SbxError), (errno.ENOSYS, sbx.NotSupported, sbx.SbxError),
    (errno.ENOKEY, sbx.CredentialsMissing, sbx.SbxError), (errno.EFBIG, sbx.TooLarge, sbx.SbxError),
    (errno.EIO, sbx.SbxError, Exception),
])
def test_code_to_class(code, cls, base):
    e = errors.from_code(-code, "the message", http_status=429, provider="local")
    assert type(e) is cls and isinstance(e, base) and isinstance(e, sbx.SbxError)
    assert str(e) == "the message" and e.message == "the message" and e.code == -code
    assert e.code_name == errno.errorcode[code]
    assert e.http_status == 429 and e.provider == "local"


def test_library_error_fields():
    # A real library error: an unknown backend, with the library's message.
    with pytest.raises(sbx.InvalidArgument) as e:
        sbx.resolve_backend("no-such-backend")
    assert e.value.code == -errno.EINVAL and "no-such-backend" in str(e.value)
    assert "local" in str(e.value)  # the message lists the choices


def test_errors_pickle():
    e = pickle.loads(pickle.dumps(sbx.NotFound("gone", -errno.ENOENT)))
    assert isinstance(e, sbx.NotFound) and str(e) == "gone"


def test_argument_checks_never_echo_values():
    secret = "sk-live-0123456789abcdef"
    # Keys are names and are quoted; values never are.
    bad = [dict(env={"K": secret, "1x": secret}), dict(labels={"a=b": secret}),
           dict(env={"K": secret + "\0"}), dict(labels={"k": secret + "\0"})]
    for kw in bad:
        with pytest.raises(sbx.InvalidArgument) as e:
            sbx.Sandbox("busybox", **kw)
        assert secret not in str(e.value), kw
