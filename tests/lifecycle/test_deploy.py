"""deploy/: every process is defined; the staging deploy checks, sweeps, dispatches, shows the board."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from models.listener_record import MatchListenerRecord
from tests import intervals
from tests.lifecycle.helpers import open_rows

PROCESSES = {
    "worker": "--queues default",
    "listener-worker": "--queues match_listeners",
    "scheduler": "kickoff scheduler",
    "launcher": "kickoff launcher",
    "srsim": "kickoff sim serve",
}
WORKER_DEPS = (
    "postgresql.service",
    "redis-server.service",
    "rabbitmq-server.service",
    "network-online.target",
)


def _directives(unit: str, name: str) -> list[str]:
    """Every value of directive ``name`` in a unit file's text (space-separated values split)."""
    out: list[str] = []
    for line in unit.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            out.extend(value.split())
    return out


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


def test_systemd_units_keep_launcher_jobs_leave_the_simulator_out_and_order_workers(repo_root: Path):
    systemd = repo_root / "deploy/systemd"
    launcher = (systemd / "kickoff-launcher.service").read_text()
    assert _directives(launcher, "KillMode") == ["process"]
    target = (systemd / "kickoff.target").read_text()
    assert "kickoff-srsim.service" not in _directives(target, "Wants")
    srsim = (systemd / "kickoff-srsim.service").read_text()
    assert "kickoff.target" not in _directives(srsim, "PartOf") + _directives(srsim, "WantedBy")
    for name in ("worker", "listener-worker"):
        unit = (systemd / f"kickoff-{name}.service").read_text()
        for dep in WORKER_DEPS:
            assert dep in _directives(unit, "After") and dep in _directives(unit, "Wants"), (name, dep)


def _deploy(repo_root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo_root / "deploy/staging-deploy.sh")], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_staging_deploy_dry_run_prints_check_sweep_without_zero_dispatch_and_status(repo_root, tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "KICKOFF": "kickoff", "RESTART_CMD": "true"}
    env.pop("KICKOFF_ENV_FILE", None)
    done = _deploy(repo_root, env)
    assert done.returncode == 0, done.stdout + done.stderr
    commands = [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")]
    assert commands == [
        "kickoff check --services",
        "kickoff db migrate",
        "sh -c true",
        "kickoff listeners sweep",
        "kickoff listeners dispatch",
        "kickoff listeners status",
    ]
    assert "--heartbeat-stale-seconds" not in done.stdout


def test_the_staging_deploy_refuses_an_unreadable_environment_file(repo_root, tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "KICKOFF_ENV_FILE": str(tmp_path / "missing")}
    done = _deploy(repo_root, env)
    assert done.returncode == 1 and "missing" in done.stderr and "+ " not in done.stdout


def _healthy_run(match, coordination) -> str:
    """A listener that is alive elsewhere: open row with a fresh heartbeat, its start lock, pending."""
    record_id = str(uuid.uuid4())
    MatchListenerRecord.create(id=record_id, match=match.id, host=socket.gethostname(), pid=os.getpid())
    assert coordination.locks.start_lock(match.id).acquire(record_id)
    assert coordination.barriers.claim_pending(match.id)
    return record_id


@pytest.mark.e2e
def test_rerunning_the_staging_deploy_closes_no_healthy_listener(
    repo_root, make_match, coordination, subprocess_env, test_env, amqp_vhost, tmp_path
):
    from models.coordination import connect_redis
    from publisher.amqp import AmqpPublisher
    from publisher.queues import OUTBOX_QUEUES

    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.declare_durable(list(OUTBOX_QUEUES))  # so `kickoff check` passes
    from models.coordination import CoordinationStore

    coordination_180 = CoordinationStore(
        coordination.client, prefix=coordination.prefix, url=coordination.url, stale_seconds=180
    )
    matches = [make_match(status="inprogress", sr_id=f"sr:match:deploy{i}") for i in range(3)]
    record_ids = {str(m.id): _healthy_run(m, coordination_180) for m in matches}
    # The settings come from the environment file only (the process environment says otherwise).
    env_file = tmp_path / "kickoff.env"
    file_settings = {**test_env, **intervals.env("production")}
    env_file.write_text("".join(f"{k}='{v}'\n" for k, v in file_settings.items()))
    env = {
        **subprocess_env,
        "LISTENER_HEARTBEAT_STALE_SECONDS": "0.5",
        "KICKOFF_ENV_FILE": str(env_file),
        "KICKOFF": str(Path(sys.executable).parent / "kickoff"),
        "RESTART_CMD": "true",
    }
    try:
        done = _deploy(repo_root, env)
        out = done.stdout
        assert done.returncode == 0, out + done.stderr
        assert f"==> environment from {env_file}" in out
        kickoff = env["KICKOFF"]
        steps = [
            "check --services",
            "db migrate",
            "listeners sweep",
            "listeners dispatch",
            "listeners status",
        ]
        lines = [f"+ {kickoff} {step}" for step in steps]
        lines.insert(2, "+ sh -c true")
        positions = [out.index(line + "\n") for line in lines]
        assert positions == sorted(positions)
        for match in matches:
            [row] = open_rows(match)
            assert str(row.id) == record_ids[str(match.id)] and row.exit_code is None
            assert coordination_180.locks.start_lock(match.id).adopt(str(row.id)).owned()
        board = out[out.index("listeners status") :]
        for match in matches:
            [line] = [ln for ln in board.splitlines() if str(match.id) in ln]
            assert "Running" in line
    finally:
        broker = connect_redis(test_env["BROKER_URL"])
        for key in broker.scan_iter(match=f"{test_env['BROKER_NAMESPACE']}:*"):
            broker.delete(key)
