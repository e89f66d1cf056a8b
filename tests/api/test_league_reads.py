"""Issue 35 item 5 against a real `kickoff serve`: a key limited to leagues reads only its leagues (404
for the rest, as if absent), and the archive verification is an operator act of the match's league."""

from __future__ import annotations

import httpx
import pytest

from api.keys import Scope, create_key
from tests.api.conftest import bearer
from tests.api.test_trades_actions_runs import trade_queues  # noqa: F401 (a fixture)
from tests.api.test_triggers import LINEUP


@pytest.fixture
def limited(api_server, db, fresh_queues):
    """An operator key and an admin key limited to leagues L1 and nfl (a fantasy league, a match league)."""
    _, operator = create_key(name="op-l1", scope=Scope.OPERATOR, leagues=["L1", "nfl"])
    _, admin = create_key(name="admin-l1", scope=Scope.ADMIN, leagues=["L1", "nfl"])
    with (
        httpx.Client(base_url=api_server.url, headers=bearer(operator), timeout=30) as op,
        httpx.Client(base_url=api_server.url, headers=bearer(admin), timeout=30) as ad,
    ):
        yield op, ad


def test_matches_board_actions_runs_audit_and_keys_of_other_leagues_are_404_or_left_out(
    api, limited, make_match
):
    op, admin = limited
    mine, theirs = make_match(league="nfl"), make_match(league="mlb")
    assert op.get(f"/v1/matches/{mine.id}").status_code == 200
    assert op.get(f"/v1/matches/{theirs.id}").status_code == 404
    assert op.get("/v1/listeners", params={"match_id": str(theirs.id)}).status_code == 404
    board = op.get("/v1/listeners").json()["matches"]
    assert {m["league"] for m in board} <= {"nfl"}

    other = api.post("/v1/trigger/lineup", json={**LINEUP, "league_id": "L2"}).json()["tracking_id"]
    own = api.post("/v1/trigger/lineup", json=LINEUP).json()["tracking_id"]
    assert op.get(f"/v1/actions/{other}").status_code == 404
    assert op.get(f"/v1/actions/{own}").status_code == 200

    run = api.post("/v1/runs", json={"job": "noop"}).json()["run_id"]
    assert op.get(f"/v1/runs/{run}").status_code == 404
    assert run not in {r["run_id"] for r in op.get("/v1/runs").json()["runs"]}
    absent = "00000000-0000-4000-8000-000000000035"
    for path, ref in (("/v1/actions/{}", other), ("/v1/runs/{}", run)):  # in the words of an absent one
        said = op.get(path.format(ref)).json()["error"].replace(ref, "REF")
        assert said == op.get(path.format(absent)).json()["error"].replace(absent, "REF"), path

    assert op.post(f"/v1/matches/{theirs.id}/archive/verify").status_code == 403  # acts: another league
    entries = op.get("/v1/audit").json()["entries"]
    assert entries == []  # the unlimited key's triggers and run are not this key's to read

    listed = {k["name"] for k in admin.get("/v1/apikeys").json()["keys"]}
    assert listed == {"op-l1", "admin-l1"}  # not the unlimited test keys


def test_a_trade_claim_records_its_key_and_a_key_claimed_in_one_league_is_free_in_another(
    api,
    limited,
    trade_queues,  # noqa: F811
):
    from models.db import database
    from tests.api.test_trades_actions_runs import OFFER

    op, _ = limited
    mine = op.post("/v1/trade/offers/t-35/approve", json=OFFER)  # L1, this key's league
    assert mine.status_code == 202, mine.text
    (claimed_by,) = database.execute_sql(
        "SELECT created_by_key_id FROM execution_log WHERE claim_key = 't-35'"
    ).fetchone()
    assert claimed_by is not None
    other = api.post("/v1/trade/offers/t-35/approve", json={**OFFER, "league_id": "L2"})
    assert other.status_code == 202 and other.json()["status"] == "published", other.text
    assert other.json()["message_id"] != mine.json()["message_id"]
    assert "L1" not in other.text  # nothing of the other league's claim
    again = op.post("/v1/trade/offers/t-35/approve", json=OFFER)
    assert again.status_code == 200 and again.json()["message_id"] == mine.json()["message_id"]
    leagues = database.execute_sql("SELECT league_id FROM execution_log WHERE claim_key = 't-35'").fetchall()
    assert sorted(x for (x,) in leagues) == ["L1", "L2"]


def test_a_limited_key_retrying_a_decision_only_another_league_claimed_sees_nothing_of_it(
    api,
    limited,
    trade_queues,  # noqa: F811
):
    decision = {"league_id": "L9", "team_id": "7", "decision": "accept"}
    assert api.post("/v1/trade/incoming/t-l9/decision", json=decision).status_code == 202
    op, _ = limited
    for body in ({}, {"decision_key": "t-l9"}):
        retry = op.post("/v1/trade/incoming/t-l9/decision/retry", json=body)
        assert retry.status_code == 404 and "L9" not in retry.text, retry.text
    named = op.post("/v1/trade/incoming/t-l9/decision/retry", json={"league_id": "L9"})
    assert named.status_code == 403, named.text  # naming another league is refused as any act there
    # the same key claimed in this key's league is its own: retried there (409: it is published)
    mine = op.post("/v1/trade/incoming/t-l9/decision", json={**decision, "league_id": "L1"})
    assert mine.status_code == 202, mine.text
    retry = op.post("/v1/trade/incoming/t-l9/decision/retry", json={})
    assert retry.status_code == 409 and "only a failed or pending decision" in retry.json()["error"]
    assert "L9" not in retry.text


def test_a_limited_key_reads_its_leagues_match_archive_and_another_leagues_is_404_as_if_absent(
    limited, make_match
):
    op, _ = limited
    mine, theirs = make_match(league="nfl"), make_match(league="mlb")
    own = op.get(f"/v1/matches/{mine.id}/archive")
    assert own.status_code == 200 and own.json() == [], own.text
    for ref in (str(theirs.id), theirs.sr_id):
        other = op.get(f"/v1/matches/{ref}/archive")
        assert other.status_code == 404, other.text
        assert "mlb" not in other.text
    # another league's match is answered in the very words of a match that does not exist
    for path in ("/v1/matches/{}", "/v1/matches/{}/archive", "/v1/listeners?match_id={}"):
        other = op.get(path.format(theirs.sr_id))
        absent = op.get(path.format("sr:match:absent"))
        assert other.status_code == absent.status_code == 404, (path, other.text)
        said = other.json()["error"].replace(theirs.sr_id, "REF")
        assert said == absent.json()["error"].replace("sr:match:absent", "REF"), path


def test_the_history_of_every_league_is_403_to_a_limited_key_and_read_by_an_unlimited_one(api, limited):
    op, _ = limited
    refused = op.get("/v1/history/events")
    assert refused.status_code == 403 and "limited to league(s) L1, nfl" in refused.json()["error"]
    assert api.get("/v1/history/events").status_code == 200
