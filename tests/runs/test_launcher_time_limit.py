"""Every run has a time limit: the launcher ends an attempt running past its job's and records why."""

from __future__ import annotations

import os

from models.run_log import RunLog
from runs.catalog import parse_catalog
from runs.launcher import time_limit_reason
from runs.publish import publish_run
from tests.runs.conftest import step_until

SLEEPER = {
    "command": ["{python}", "-m", "runs.jobs.noop"],
    "params": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 600}},
    },
    "time_limit_seconds": 1,
}


def test_a_run_past_its_time_limit_is_ended_and_recorded_failed_with_the_reason(make_launcher, publisher):
    catalog = parse_catalog({"jobs": {"sleep": SLEEPER}})
    launcher = make_launcher(job_catalog=catalog)
    result = publish_run("sleep", {"seconds": 600}, trigger="cli", catalog=catalog, publisher=publisher)
    step_until(launcher, lambda: RunLog.get_by_id(result.run_id).status == "failed", timeout=60)
    run = RunLog.get_by_id(result.run_id)
    assert run.reason == time_limit_reason(1) and "time limit 1 s passed" in run.error
    assert launcher.running == {}
    try:
        os.killpg(run.pid, 0)
    except ProcessLookupError:
        pass  # the whole process group is gone
    else:
        raise AssertionError(f"run {run.id}: its process group {run.pid} still lives")
