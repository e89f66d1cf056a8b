"""Paths on the console: the match card names them under DATA_DIR; a refused path is 404, never 500."""

from __future__ import annotations

import uuid

from models.listener_record import MatchListenerRecord
from tests.console.conftest import write_archive


def test_the_match_card_shows_the_archive_name_and_log_paths_relative_to_data_dir(
    console_server, console_keys, signed_in, make_match, test_env
):
    match = make_match("nfl", sr_id="sr:match:rel", status="closed")
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    archive = write_archive(test_env["DATA_DIR"], "nfl", match.sr_id, events=2)
    (archive.parent / f"{archive.stem}.{str(record.id)[:8]}.log").write_text("a line\n")
    card = signed_in(console_keys["read"]).client.get(f"/matches/{match.id}")
    assert card.status_code == 200
    assert "<code>sr_match_rel.json</code>" in card.text and "2 events in the event log" in card.text
    assert f"<code>listener/nfl/sr_match_rel.{str(record.id)[:8]}.log</code>" in card.text
    assert str(archive.parent) not in card.text


def test_refused_archive_and_log_paths_are_404(console_server, console_keys, signed_in, make_match):
    client = signed_in(console_keys["read"]).client
    match = make_match("nfl", sr_id="sr:match:paths", status="closed")
    for record_id in ("..%2e", "..", ".hidden"):
        answer = client.get(f"/matches/{match.id}/runs/{record_id}/log")
        assert answer.status_code == 404, (record_id, answer.text)
    hostile = make_match("nfl", sr_id="../../etc", status="closed")
    for path in (f"/matches/{hostile.id}/archive", f"/matches/{hostile.id}/runs/{uuid.uuid4()}/log"):
        answer = client.get(path)
        assert answer.status_code == 404, (path, answer.text)
        assert "refusing" in answer.json()["error"]
