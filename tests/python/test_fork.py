# SPDX-License-Identifier: MIT
"""Sandbox.fork: children start from the parent's files and stay apart."""
import pytest

import sbx


def test_fork_children_start_from_parent(sandbox):
    assert sandbox.exec("echo prefix > /prefix").exit_code == 0
    kids = sandbox.fork(2)
    try:
        assert len(kids) == 2 and len({k.id for k in kids} | {sandbox.id}) == 3
        for k in kids:
            assert k.exec("cat /prefix").stdout == b"prefix\n"
        assert kids[0].exec("echo mine > /prefix").exit_code == 0
        assert kids[1].exec("cat /prefix").stdout == b"prefix\n"
        assert sandbox.exec("cat /prefix").stdout == b"prefix\n"
    finally:
        for k in kids:
            k.destroy()


@pytest.mark.parametrize("n", [0, -1, 1025, True, 1.5])
def test_fork_bad_count(sandbox, n):
    with pytest.raises(sbx.InvalidArgument, match="n:"):
        sandbox.fork(n)
