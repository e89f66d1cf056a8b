"""`kickoff runs ...` and `kickoff launcher --help` as an operator runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from models.run_log import RunLog


def kickoff(env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_runs_publish_list_and_show(db, publisher, subprocess_env, amqp_vhost):
    out = kickoff(subprocess_env, "runs", "publish", "sleep", "--param", "seconds=2", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "queued" and result["published"] is True
    run = RunLog.get_by_id(result["run_id"])
    assert (run.job, run.trigger, run.params) == ("sleep", "cli", {"seconds": 2})

    listed = kickoff(subprocess_env, "runs", "list", "--json")
    assert [run["run_id"] for run in json.loads(listed.stdout)["runs"]] == [result["run_id"]]

    shown = kickoff(subprocess_env, "runs", "show", result["run_id"], "--json")
    assert json.loads(shown.stdout)["status"] == "queued"
    text = kickoff(subprocess_env, "runs", "show", result["run_id"])
    assert "dedupe_key" in text.stdout and result["run_id"] in text.stdout


def test_runs_show_of_an_unknown_run_exits_2(db, subprocess_env):
    out = kickoff(subprocess_env, "runs", "show", str(uuid.uuid4()))
    assert out.returncode == 2 and "no run" in out.stderr


def test_invalid_params_are_one_line_exit_3_and_save_nothing(db, subprocess_env):
    out = kickoff(subprocess_env, "runs", "publish", "sleep", "--param", "seconds=soon")
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0 and "invalid params" in out.stderr
    assert RunLog.select().count() == 0


def test_an_unknown_job_exits_3_naming_the_catalog_jobs(db, subprocess_env):
    """An invalid request (the API's 422), no longer exit 2: one kind, one code (cli/answers.EXIT_OF)."""
    out = kickoff(subprocess_env, "runs", "publish", "nope")
    assert out.returncode == 3 and "noop" in out.stderr


def test_a_bad_catalog_is_one_line(db, subprocess_env, tmp_path):
    bad = tmp_path / "catalog.yaml"
    bad.write_text("jobs:\n  a: {overlap: sometimes, command: [x]}\n")
    out = kickoff({**subprocess_env, "JOB_CATALOG_PATH": str(bad)}, "runs", "catalog")
    assert out.returncode == 1
    assert out.stderr.startswith(f"Error: invalid job catalog {bad}: jobs/a/overlap")


def test_launcher_help_explains_acks_cap_and_restart(subprocess_env):
    out = kickoff(subprocess_env, "launcher", "--help")
    assert out.returncode == 0
    for words in ("--cap", "acked", "rebuilds", "SIGTERM"):
        assert words in out.stdout
