# SPDX-License-Identifier: MIT
"""sbx.Task and sbx.run_episode on the bundled fixture tasks (busybox)."""
import json
import uuid

import pytest

import sbx
from conftest import FIXTURE_TASKS


def test_task_load_and_list():
    with sbx.Task.load(FIXTURE_TASKS / "pass") as t:
        assert t.name == "pass" and t.docker_image == "busybox" and t.has_solution
        assert t.memory_mb == 512 and t.verifier_timeout_sec == 60.0
        assert t.dir.endswith("tests/fixtures/tasks/pass")
    names = sbx.Task.list(FIXTURE_TASKS)
    assert "pass" in names and names == sorted(names)


def test_task_load_errors():
    with pytest.raises(sbx.NotFound) as e:
        sbx.Task.load(FIXTURE_TASKS / "does-not-exist")
    assert "does-not-exist" in str(e.value)
    with pytest.raises(sbx.InvalidArgument) as e:
        sbx.Task.load(FIXTURE_TASKS / "malformed")
    assert "task.toml" in str(e.value)
    with pytest.raises(TypeError):
        sbx.Task()


def test_run_episode_oracle_reward_1(runtime, tmp_path):
    tag = uuid.uuid4().hex
    rec = sbx.run_episode(FIXTURE_TASKS / "pass", labels={"pytest": tag}, logs_dir=tmp_path,
                          runtime=runtime)
    assert rec.status == "Submitted" and rec.submitted
    assert rec.reward == 1.0 and rec.agent == "oracle" and rec.task == "pass"
    assert rec.reward_source == "reward.txt" and rec.verifier_ran and rec.agent_exit_code == 0
    assert set(rec.stage_seconds) >= {"create", "exec", "verify", "destroy"}
    assert all(v > 0 for v in rec.stage_seconds.values())
    assert rec.total_seconds >= sum(rec.stage_seconds.values()) * 0.5
    assert rec.record["task"] == "pass" and rec.record["exit_status"] == "Submitted"
    assert json.loads((tmp_path / "result.json").read_text())["task"] == "pass"
    assert runtime.list_sandboxes(labels={"pytest": tag}) == []


def test_run_episode_statuses(runtime):
    with sbx.Task.load(FIXTURE_TASKS / "oracle-fails") as t:
        rec = sbx.run_episode(t, runtime=runtime)
    assert rec.agent_exit_code == 3 and "failing on purpose" in rec.agent_log_tail
    rec = sbx.run_episode(FIXTURE_TASKS / "reward-missing", runtime=runtime)
    assert rec.status == "VerifierError" and rec.reward is None and rec.detail
    rec = sbx.run_episode(FIXTURE_TASKS / "pass", agent="nop", runtime=runtime)
    assert rec.agent == "nop" and rec.reward == 0.0


def test_run_episode_bad_arguments(runtime):
    with pytest.raises(sbx.InvalidArgument) as e:
        sbx.run_episode(FIXTURE_TASKS / "pass", agent="no-such-agent", runtime=runtime)
    assert "no-such-agent" in str(e.value)
    with pytest.raises(sbx.InvalidArgument, match="max_episode_s"):
        sbx.run_episode(FIXTURE_TASKS / "pass", max_episode_s=-1, runtime=runtime)
    with pytest.raises(sbx.InvalidArgument, match="agent_args"):
        sbx.run_episode(FIXTURE_TASKS / "pass", agent_args={"=x": "y"}, runtime=runtime)
