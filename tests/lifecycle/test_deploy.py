"""deploy/: every process is defined, and the staging deploy migrates, restarts, sweeps with 0, dispatches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.lifecycle.helpers import dead_run, reload, rows_of

PROCESSES = {
    "worker": "--queues default",
    "listener-worker": "--queues match_listeners",
    "scheduler": "kickoff scheduler",
    "launcher": "kickoff launcher",
    "srsim": "kickoff sim serve",
}


def test_the_procfile_and_systemd_define_every_process(repo_root: Path):
    procfile = dict(
        line.split(": ", 1)
        for line in (repo_root / "deploy/Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for name, needle in PROCESSES.items():
        assert needle in procfile[name]
        unit = (repo_root / f"deploy/systemd/kickoff-{name}.service").read_text()
        assert needle in unit and "EnvironmentFile=" in unit


@pytest.mark.e2e
def test_the_staging_deploy_sweeps_with_zero_then_dispatches(
    repo_root, make_match, barriers, subprocess_env, lifecycle_env, tmp_path
):
    from config.settings import MatchListenerEnvironment
    from models.barriers import Barriers, connect_redis

    b = Barriers.from_settings(MatchListenerEnvironment(_env_file=None), client=barriers.client)
    match = make_match(status="inprogress")
    dead_run(match, b, age_seconds=0.5)  # killed by the restart: not yet stale by the normal threshold
    restarted = tmp_path / "restarted"
    env = {
        **subprocess_env,
        **lifecycle_env,
        "KICKOFF": str(Path(sys.executable).parent / "kickoff"),
        "RESTART_CMD": f"touch {restarted}",
    }
    done = subprocess.run(
        [str(repo_root / "deploy/staging-deploy.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    steps = ["db migrate", f"touch {restarted}", "sweep --heartbeat-stale-seconds 0", "listeners dispatch"]
    positions = [out.index(step) for step in steps]
    assert positions == sorted(positions) and restarted.exists()
    assert "sweep: 1 rows abandoned (14)" in out and "dispatch: 1 enqueued" in out
    assert rows_of(match)[0].exit_code == 14 and reload(match).auto_dispatch_listener is True
    broker = connect_redis(lifecycle_env["BROKER_URL"])
    for key in broker.scan_iter(match=f"{lifecycle_env['BROKER_NAMESPACE']}:*"):
        broker.delete(key)
