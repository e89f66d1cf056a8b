"""Injury alerts: direct publish to waiver_actions after a queue check; no team, tracking or trace."""

from __future__ import annotations

import pytest

from publisher.alerts import InjuryChange, publish_injury_alerts
from publisher.errors import MissingQueueError


def _change(**kw):
    base = {
        "player_id": "4046",
        "player_name": "P. Mahomes",
        "previous_status": None,
        "status": "Questionable",
        "rostered": True,
        "nfl_team": "KC",
    }
    base.update(kw)
    return InjuryChange(**base)


@pytest.mark.parametrize("status", ["Questionable", "Doubtful", "Out"])
def test_a_rostered_players_change_to_an_alert_status_is_published(publisher, read_queue, status):
    [message_id] = publish_injury_alerts([_change(status=status)], publisher=publisher)
    [(body, props)] = read_queue("waiver_actions")
    assert body["event_type"] == "INJURY_STATUS_CHANGE" and body["status"] == status
    assert body["player_id"] == "4046" and props.message_id == message_id
    assert not {"team_id", "tracking_id", "traceparent"} & set(body) and not props.headers


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_change(rostered=False), id="not-rostered"),
        pytest.param(_change(status="IR"), id="other-status"),
        pytest.param(_change(status="Out", previous_status="Out"), id="no-change"),
        pytest.param(_change(status=None, previous_status="Out"), id="healthy-again"),
    ],
)
def test_no_alert_for_other_changes(publisher, read_queue, change):
    assert publish_injury_alerts([change], publisher=publisher) == []
    assert read_queue("waiver_actions") == []


def test_the_queue_is_checked_first(publisher):
    publisher.delete_queue("waiver_actions")
    with pytest.raises(MissingQueueError, match="waiver_actions"):
        publish_injury_alerts([_change()], publisher=publisher)
