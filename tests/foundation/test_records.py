from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from api.keys import ApiKey, Scope
from config.records import json_fields
from publisher.trades import TradeResult, TradeStatus


class Colour(StrEnum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    at: datetime
    colour: Colour


@dataclass(frozen=True)
class Outer:
    name: str
    inner: tuple[Inner, ...]
    tags: list[str]
    missing: datetime | None = None


def test_a_record_becomes_its_fields_in_order_with_plain_json_values():
    at = datetime(2026, 9, 7, 17, 0, tzinfo=UTC)
    out = json_fields(Outer(name="x", inner=(Inner(at=at, colour=Colour.RED),), tags=["a"]))
    assert list(out) == ["name", "inner", "tags", "missing"]
    assert out == {
        "name": "x",
        "inner": [{"at": "2026-09-07T17:00:00+00:00", "colour": "red"}],
        "tags": ["a"],
        "missing": None,
    }
    assert type(out["inner"][0]["colour"]) is str
    assert json.loads(json.dumps(out)) == out


def test_a_stored_api_key_reads_as_before_scope_value_and_iso_times():
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    key = ApiKey(id="k1", name="ops", scope=Scope.OPERATOR, created_at=created, revoked_at=None)
    assert key.as_dict() == {
        "id": "k1",
        "name": "ops",
        "scope": "operator",
        "created_at": "2026-01-02T03:04:05+00:00",
        "revoked_at": None,
        "leagues": None,
    }


def test_a_trade_result_reads_its_status_as_text():
    result = TradeResult(status=TradeStatus.PENDING, queue="q", claim_key="c", message_id="m")
    assert result.as_json() == {
        "status": "pending",
        "queue": "q",
        "claim_key": "c",
        "message_id": "m",
        "error": None,
    }
