"""Issue 35 item 6 against a real `kickoff serve`: a sync run's feed URL (a run's ``params.source`` from
before params could name no place, and the line its job printed) is masked on `/v1/runs/{id}`, the
console's run page and the runs list for every reader but an admin, who sees it whole."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from models.run_log import RunLog
from tests.api.conftest import bearer

pytestmark = pytest.mark.services

SECRET = "s3cr3t-api-key"
PASSWORD = "hunter2"
FEED = f"https://feeds:{PASSWORD}@feeds.example/players.json?api_key={SECRET}"


@pytest.fixture
def old_sync_run(db, tmp_path: Path) -> RunLog:
    """A finished sync_players run as published before its params could name a feed, and its log."""
    log = tmp_path / "sync.log"
    log.write_text(f'{{"source": "{FEED}", "players": 3}}\n')
    return RunLog.create(
        job="sync_players",
        trigger="api",
        dedupe_key=f"old-{uuid.uuid4()}",
        params={"source": FEED},
        status="failed",
        reason=f"fetch of {FEED} failed",
        log_path=str(log),
    )


def test_a_read_key_and_session_see_the_sync_url_masked_and_an_admin_sees_it_whole(
    console_server, console_keys, signed_in, old_sync_run
):
    run_id = str(old_sync_run.id)
    for scope in ("read", "operator"):
        shown = httpx.get(
            f"{console_server.url}/v1/runs/{run_id}", headers=bearer(console_keys[scope]), timeout=60
        )
        assert shown.status_code == 200, shown.text
        assert shown.json()["params"]["source"] == "https://feeds:***@feeds.example/players.json?api_key=***"
        assert SECRET not in shown.text and PASSWORD not in shown.text
        listed = httpx.get(f"{console_server.url}/v1/runs", headers=bearer(console_keys[scope]), timeout=60)
        assert run_id in listed.text and SECRET not in listed.text and PASSWORD not in listed.text
    whole = httpx.get(
        f"{console_server.url}/v1/runs/{run_id}", headers=bearer(console_keys["admin"]), timeout=60
    )
    assert whole.json()["params"]["source"] == FEED
    assert whole.json()["reason"] == "fetch of <address> failed"  # a stored failure names no place for anyone

    reader = signed_in(console_keys["read"])
    page = reader.client.get(f"/runs/{run_id}")
    assert page.status_code == 200 and "feeds.example/players.json" in page.text  # params and the log tail
    assert SECRET not in page.text and PASSWORD not in page.text
    listing = reader.client.get("/runs")
    assert run_id in listing.text and SECRET not in listing.text and PASSWORD not in listing.text
    admin = signed_in(console_keys["admin"])
    assert SECRET in admin.client.get(f"/runs/{run_id}").text
