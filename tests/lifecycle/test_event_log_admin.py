"""kickoff events import (a DATA_DIR's archive files into the log, idempotent) and prune (audited, refused
while a match of the range is live)."""

from __future__ import annotations

import json

from listener.archive import EventArchive, archive_path, shortcode_for
from models.audit import audit_entries
from models.db import database
from models.event_log import log_summary, messages_of
from models.match import Match
from tests.logged import event_log_of


def _message(sr_id: str, n: int) -> dict:
    return {
        "payload": {"event": {"id": f"e{n}"}},
        "metadata": {"match": f"sd:match:{sr_id}", "operation": "create"},
    }


def test_import_loads_each_message_once_and_says_what_it_skipped(make_match, kick, tmp_path):
    match = make_match("mlb", sr_id="sr:match:77", status="closed")
    event_log_of(match.id, [_message(match.sr_id, 0)]).close()  # a listener logged one already
    archive = EventArchive(archive_path(tmp_path, "mlb", shortcode_for(match.sr_id))).open()
    for n in range(3):
        archive.append(_message(match.sr_id, n))
    archive.append({**_message(match.sr_id, 3), "kickoff": {"backfilled": "play_by_play"}})
    archive.close()
    stray = EventArchive(archive_path(tmp_path, "mlb", "nobody")).open()
    stray.append(_message("nobody", 1))
    stray.close()

    first = json.loads(
        kick("events", "import", "--data-dir", str(tmp_path), "--json").stdout.splitlines()[-1]
    )
    assert (first["files"], first["loaded"], first["already"], first["unreadable"]) == (2, 3, 1, 0)
    assert first["unknown"] == [str(archive_path(tmp_path, "mlb", "nobody"))]
    again = kick("events", "import", "--data-dir", str(tmp_path)).stdout
    assert "0 loaded, 4 already there, 0 unreadable from 2 files" in again
    assert [m["payload"]["event"]["id"] for m in messages_of(match.id)] == ["e0", "e1", "e2", "e3"]
    assert messages_of(match.id)[3]["kickoff"]["backfilled"] == "play_by_play"


def test_prune_refuses_while_a_match_of_the_range_is_live_then_deletes_and_audits(make_match, kick):
    live, over = make_match("mlb", status="inprogress"), make_match("mlb", status="closed")
    for match in (live, over):
        event_log_of(match.id, [_message(match.sr_id, n) for n in range(3)]).close()
    for table in ("match_events", "match_event_keys"):
        database.execute_sql(f"UPDATE {table} SET arrived_at = arrived_at - interval '40 days'")

    refused = kick("events", "prune", "--older-than", "30", "--reason", "drill", code=4)
    assert str(live.id) in refused.stderr and log_summary(over.id).events == 3
    Match.update(status="closed").where(Match.id == live.id).execute()
    done = json.loads(kick("events", "prune", "--older-than", "30", "--reason", "drill", "--json").stdout)
    assert done["events"] == 6 and done["keys"] == 6
    assert log_summary(live.id).events == 0 and log_summary(over.id).events == 0
    [entry] = audit_entries(action="events.prune")
    assert entry.reason == "drill" and entry.after["events"] == 6
    assert kick("events", "prune", "--older-than", "30", "--reason", "again").exit_code == 0
