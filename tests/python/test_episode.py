# SPDX-License-Identifier: MIT
"""sbx.Episode: reset -> step ... -> evaluate on the bundled fixture tasks."""
import asyncio
import shutil
import uuid

import pytest

import sbx
import sbx.aio
from conftest import BUILD_ROOT, FIXTURE_TASKS


@pytest.fixture(autouse=True)
def turn_api():
    # A library without the API is not a machine missing a tool: a plain
    # skip, also under SBX_MUST_WORK=1 (the API lands with the policy agent).
    if not sbx.Episode.supported():
        pytest.skip("this libsbx has no turn-by-turn episode API (sbx_episode_begin)")


def test_reset_step_evaluate_reward_1(runtime):
    tag = uuid.uuid4().hex
    with sbx.Episode(FIXTURE_TASKS / "pass", labels={"pytest": tag}, runtime=runtime) as ep:
        prompt = ep.reset()
        assert prompt == ep.instruction and prompt
        assert len(runtime.list_sandboxes(labels={"pytest": tag})) == 1
        obs = ep.step("ls /tests 2>&1; echo rc=$?")
        assert "rc=" in obs.output and obs.exit_code == 0 and not obs.done
        obs = ep.step("echo hello > /tmp/answer")
        assert obs.exit_code == 0 and obs.output == "(no output)"
        obs = ep.step("exit 7")
        assert obs.exit_code == 7
        rec = ep.evaluate()
        assert rec.reward == 1.0 and rec.status == "Submitted" and rec.verifier_ran
        assert [t["command"] for t in rec.trajectory["turns"]] == [
            "ls /tests 2>&1; echo rc=$?", "echo hello > /tmp/answer", "exit 7"]
        assert rec.trajectory["turns"][2]["exit_code"] == 7
        assert not ep.running
        assert runtime.list_sandboxes(labels={"pytest": tag}) == []
        with pytest.raises(sbx.Closed):
            ep.step("true")
        # reset() again plays a fresh episode: nothing carried over.
        ep.reset()
        assert ep.step("cat /tmp/answer").exit_code != 0
        rec = ep.evaluate()
        assert rec.reward == 0.0


def test_step_timeout_and_output(runtime):
    with sbx.Episode(FIXTURE_TASKS / "pass", runtime=runtime) as ep:
        ep.reset()
        obs = ep.step("echo before; sleep 30", timeout=0.5)
        assert obs.timed_out and "before" in obs.output
        obs = ep.step("printf 'a\\377b'; echo err >&2")
        # The library feeds a model valid UTF-8: a stray byte is replaced.
        assert obs.output.startswith("a\ufffdb") and "err" in obs.output
        assert obs.output_bytes == obs.output.encode()
        with pytest.raises(sbx.InvalidArgument, match="command"):
            ep.step("")
        with pytest.raises(sbx.InvalidArgument, match="timeout"):
            ep.step("true", timeout=-2)


def test_close_abandons_running_episode(runtime):
    tag = uuid.uuid4().hex
    ep = sbx.Episode(FIXTURE_TASKS / "pass", labels={"pytest": tag}, runtime=runtime)
    ep.reset()
    ep.abort()
    assert not ep.running and runtime.list_sandboxes(labels={"pytest": tag}) == []
    ep.reset()
    assert len(runtime.list_sandboxes(labels={"pytest": tag})) == 1
    ep.close()
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []
    with pytest.raises(sbx.Closed):
        ep.reset()


def test_episode_errors(runtime):
    with pytest.raises(sbx.NotFound):
        sbx.Episode(FIXTURE_TASKS / "does-not-exist", runtime=runtime)
    with pytest.raises(sbx.InvalidArgument, match="max_episode_s"):
        sbx.Episode(FIXTURE_TASKS / "pass", max_episode_s=0, runtime=runtime)
    with sbx.Episode(FIXTURE_TASKS / "missing-image", runtime=runtime) as ep:
        with pytest.raises(sbx.SbxError):
            ep.reset()
        assert not ep.running
    with sbx.Episode(FIXTURE_TASKS / "pass", runtime=runtime) as ep:
        with pytest.raises(sbx.Closed, match="reset"):
            ep.step("true")
        with pytest.raises(sbx.Closed):
            ep.evaluate()


def test_aio_episode_and_cancelled_reset():
    state = BUILD_ROOT / "test-state" / f"py-ep-{uuid.uuid4().hex[:8]}"
    images = str(BUILD_ROOT / "test-images")
    tag = uuid.uuid4().hex
    rt = sbx.Runtime(state_dir=str(state), image_dir=images)

    async def play():
        async with sbx.aio.Episode(FIXTURE_TASKS / "pass", runtime=rt) as ep:
            await ep.reset()
            await ep.step("echo hello > /tmp/answer")
            return (await ep.evaluate()).reward

    async def cancelled(delay):
        ep = sbx.aio.Episode(FIXTURE_TASKS / "pass", labels={"pytest": tag}, runtime=rt)
        t = asyncio.ensure_future(ep.reset())
        await asyncio.sleep(delay)
        t.cancel()
        try:
            await t
        except asyncio.CancelledError:
            # The Episode stays usable after a cancelled reset.
            await ep.reset()
            await ep.step("echo hello > /tmp/answer")
            assert (await ep.evaluate()).reward == 1.0
        await ep.close()

    async def main():
        assert await play() == 1.0
        await asyncio.gather(*(cancelled(d) for d in (0, 0.01, 0.05, 0.1, 0.2, 0.4)))
    try:
        asyncio.run(main())
        sbx.aio.shutdown()
    finally:
        rt.close()
    rt2 = sbx.Runtime(state_dir=str(state), image_dir=images)
    try:
        assert rt2.list_sandboxes(labels={"pytest": tag}) == []
    finally:
        rt2.close()
        shutil.rmtree(state, ignore_errors=True)
