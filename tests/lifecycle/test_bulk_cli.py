"""`kickoff listeners bulk`: the preview, the question (or --yes), exactly the previewed matches."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.listeners import BULK_ACTIONS
from cli.main import cli
from lifecycle.bulk import ACTIONS
from models.audit import audit_entries
from tests.lifecycle.helpers import reload


@pytest.mark.unit
def test_the_cli_offers_the_librarys_actions():
    assert BULK_ACTIONS == ACTIONS


def _bulk(*args: str, answer: str | None = None, code: int = 0):
    result = CliRunner().invoke(cli, ["listeners", "bulk", *args], input=answer, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_the_preview_is_shown_and_asked_about_and_yes_acts_without_asking(db, redis_client, make_match):
    first = make_match("clib", status="inprogress")
    second = make_match("clib", status="inprogress")
    make_match("clib", status="closed")
    args = ("dispatch-off", "--league", "clib", "--status", "inprogress", "--reason", "drill")

    declined = _bulk(*args, answer="n\n", code=1)
    assert "bulk dispatch-off: 2 matches" in declined.output and first.sr_id in declined.output
    assert "these 2 matches?" in declined.output
    assert reload(first).auto_dispatch_listener and reload(second).auto_dispatch_listener

    done = _bulk(*args, "--yes")
    assert "?" not in done.output and "2 done, 0 failed" in done.output
    assert not reload(first).auto_dispatch_listener and not reload(second).auto_dispatch_listener
    [whole] = audit_entries(action="listeners.bulk")
    assert sorted(whole.after["match_ids"]) == sorted([str(first.id), str(second.id)])
    assert {e.reason for e in audit_entries(action="match.dispatch_off")} == {"drill"}


def test_dry_run_json_changes_nothing_and_json_with_yes_prints_the_results(db, redis_client, make_match):
    match = make_match("clij", status="inprogress")
    preview = json.loads(_bulk("stop", "--league", "clij", "--reason", "r", "--dry-run", "--json").output)
    assert preview["count"] == 1 and preview["match_ids"] == [str(match.id)]
    assert reload(match).auto_dispatch_listener
    done = json.loads(_bulk("stop", "--match", match.sr_id, "--reason", "r", "--yes", "--json").output)
    assert done["results"] == [
        {
            "match_id": str(match.id),
            "title": f"{match.sr_id} (clij)",
            "ok": True,
            "detail": done["results"][0]["detail"],
        }
    ]
    assert not reload(match).auto_dispatch_listener


def test_usage_errors(db, redis_client, make_match):
    assert "a reason is required" in _bulk("stop", "--league", "x", "--reason", " ", code=2).output
    assert "league or match ids" in _bulk("stop", "--reason", "r", code=3).output  # invalid (BulkInvalid)
    assert "--yes or --dry-run" in _bulk("stop", "--league", "x", "--reason", "r", "--json", code=2).output
    assert "no league named" in _bulk("stop", "--league", "nope", "--reason", "r", code=2).output
    assert (
        "unknown badge" in _bulk("stop", "--league", "x", "--badge", "Fine", "--reason", "r", code=3).output
    )


@pytest.mark.unit
def test_the_canonical_filter_sorts_and_dedupes_ids_and_blank_fields_are_unset():
    from lifecycle.bulk import bulk_filter

    flt = bulk_filter(league=" nfl ", status="", badge=None, match_ids=["b", "a", "b", " "])
    assert flt.canonical() == {"league": "nfl", "status": None, "badge": None, "match_ids": ["a", "b"]}
    assert flt.text() == '{"badge":null,"league":"nfl","match_ids":["a","b"],"status":null}'


@pytest.mark.unit
@pytest.mark.parametrize(
    ("action", "fields", "reason", "field"),
    [
        ("halt", {"league": "nfl"}, "r", "action"),
        ("stop", {}, "r", "filter"),
        ("stop", {"league": "nfl", "status": "playing"}, "r", "filter.status"),
        ("stop", {"league": "nfl", "badge": "Fine"}, "r", "filter.badge"),
        ("stop", {"league": "nfl"}, "  ", "reason"),
    ],
)
def test_a_bulk_action_is_refused_before_anything_is_read(action, fields, reason, field):
    from lifecycle.bulk import bulk_filter, preview_bulk
    from lifecycle.errors import BulkInvalid
    from models.audit import Actor

    with pytest.raises(BulkInvalid) as refused:
        preview_bulk(
            action, bulk_filter(**fields), settings=None, coordination=None, actor=Actor.cli(), reason=reason
        )
    assert refused.value.field == field
