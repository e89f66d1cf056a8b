"""kickoff sim clone: a recorded match becomes an is_test clone whose script replays its events."""

from __future__ import annotations

import json
import uuid

import pytest

from config.errors import MatchNotFound
from listener.archive import EventArchive, archive_path
from models import Match
from srsim.clone import clone_match
from srsim.script import load_script


def test_a_recorded_match_is_cloned_into_an_is_test_match_and_a_replay_script(make_match, tmp_path):
    source = make_match("nhl", sr_id=str(uuid.uuid4()), status="closed", title="STL @ NSH")
    archive = EventArchive(archive_path(tmp_path, "nhl", source.sr_id)).open()
    sent = [
        {
            "payload": {"game": {"id": source.sr_id, "status": "inprogress"}, "event": {"id": f"e{i}"}},
            "metadata": {"match": f"sd:match:{source.sr_id}", "operation": "create"},
        }
        for i in range(5)
    ]
    for e in sent:
        archive.append(e)
    archive.append_marker("delay", status="delayed")
    archive.close()

    clone, script, count = clone_match(source.sr_id, data_dir=tmp_path, start_after=1, event_interval=0.1)

    assert count == 5  # the kickoff marker is not replayed
    row = Match.get_by_id(clone.id)
    assert (
        row.is_test and row.status == "scheduled" and row.league.name == "nhl" and row.sr_id != source.sr_id
    )
    [game] = load_script(script)
    envelopes = game.envelopes(row.scheduled)
    assert [e["payload"]["event"]["id"] for e in envelopes] == [f"e{i}" for i in range(5)]
    assert {e["metadata"]["match"] for e in envelopes} == {f"sd:match:{row.sr_id}"}
    assert json.loads(script.read_text())["games"][0]["is_test"] is True


def test_cloning_an_unknown_match_is_not_found(db, tmp_path):
    with pytest.raises(MatchNotFound):
        clone_match("nope", data_dir=tmp_path)
