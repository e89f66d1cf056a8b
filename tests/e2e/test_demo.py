"""The README's run command, end to end: ``kickoff demo --json`` with real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.e2e
@pytest.mark.timeout(420)
def test_kickoff_demo_passes_and_reports_every_match(subprocess_env, db):
    result = subprocess.run(
        [sys.executable, "-m", "cli", "demo", "--json"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True
    assert len(summary["matches"]) == 3
    for match in summary["matches"]:
        assert {"sr_id", "status", "exit_code", "events", "archive"} <= set(match)
        assert match["status"] == "closed"
        assert match["exit_code"] == 13
        assert match["events"] > 0
        archive = Path(match["archive"])
        assert archive.is_relative_to(subprocess_env["DATA_DIR"])
        archived = [e for e in json.loads(archive.read_text()) if "payload" in e]
        assert len(archived) == match["events"]
        assert match["live"] > 0 and match["backfilled"] >= 0  # streamed, not only backfilled
        assert match["missing"] == 0 and match["extra"] == 0  # every archive srsim's game exactly
    killed = summary["matches"][0]
    assert killed["backfilled"] > 0, killed  # what the kill missed, recovered
