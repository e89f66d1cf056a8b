"""The API process is deployed like the others; each worker command has its own Prometheus port."""

from __future__ import annotations

from pathlib import Path


def _procfile(repo_root: Path) -> dict[str, str]:
    lines = (repo_root / "deploy/Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def test_api_is_in_the_procfile_and_has_a_systemd_unit_in_the_target(repo_root: Path):
    assert _procfile(repo_root)["api"] == "kickoff serve"
    unit = (repo_root / "deploy/systemd/kickoff-api.service").read_text()
    assert "ExecStart=/opt/kickoff/.venv/bin/kickoff serve" in unit and "EnvironmentFile=" in unit
    assert "kickoff-api.service" in (repo_root / "deploy/systemd/kickoff.target").read_text()


def test_worker_commands_get_distinct_prometheus_ports(repo_root: Path):
    procfile = _procfile(repo_root)
    assert "dramatiq_prom_port=9191" in procfile["worker"]
    assert "dramatiq_prom_port=9192" in procfile["listener-worker"]
    for name, port in (("worker", 9191), ("listener-worker", 9192)):
        unit = (repo_root / f"deploy/systemd/kickoff-{name}.service").read_text()
        assert f"dramatiq_prom_port={port}" in unit
