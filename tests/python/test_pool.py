# SPDX-License-Identifier: MIT
"""Runtime.pool: a matching Sandbox starts from the pool; idle ones go with
the runtime."""
import uuid

import pytest

import sbx


def test_pool_hands_out_and_close_destroys_idle(runtime, tmp_path):
    rt = sbx.Runtime(state_dir=str(tmp_path / "state"), image_dir=runtime.image_dir)
    try:
        tag = uuid.uuid4().hex
        rt.pool("busybox", 2, labels={"pytest": tag}, wait=120)
        assert rt.pool_ready() == 2
        sb = sbx.Sandbox("busybox", labels={"pytest": tag}, ttl=600, runtime=rt)
        row = [r for r in rt.list_sandboxes(labels={"pytest": tag}) if r.id == sb.id][0]
        assert "sbx.pool" in row.labels, "served from the pool"
        assert sb.exec("echo hi").stdout == b"hi\n"
        sb.destroy()
        cold = sbx.Sandbox("busybox", runtime=rt)  # no labels: another spec
        assert cold.id not in [r.id for r in rt.list_sandboxes(labels={"pytest": tag})]
        cold.destroy()
        with pytest.raises(sbx.InvalidArgument):
            rt.pool("busybox", 0)
    finally:
        rt.close()
    rt2 = sbx.Runtime(state_dir=str(tmp_path / "state"), image_dir=runtime.image_dir)
    try:
        assert rt2.list_sandboxes(labels={"pytest": tag}) == []
    finally:
        rt2.close()
