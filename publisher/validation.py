"""Trigger request checks that run before anything is saved: each refusal names its field.

Lineup, waiver-claim and draft player ids are ESPN ids: positive JSON integers. Sleeper ids
are strings (``"4046"``, ``"DAL"``), so a string where an ESPN id belongs is refused as a
Sleeper id; counter staging and injury alerts take Sleeper ids and refuse integers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from config.feed_text import unstorable_text
from publisher.errors import TriggerValidationError

SWAP_FIELDS = frozenset({"player_id", "to_slot", "kind"})
#: The largest id PostgreSQL's bigint (``players.espn_id``) holds.
MAX_ESPN_ID = 2**63 - 1
SWAP_KINDS = frozenset({"ir", "lineup"})
IR_SLOT = "IR"


def espn_id(value: Any, field: str) -> int:
    """Return ``value`` as an ESPN player id; a Sleeper id (a string) or anything else is refused."""
    if isinstance(value, bool) or value is None:
        raise TriggerValidationError(
            field, f"an ESPN player id (positive integer) is required, got {value!r}"
        )
    if isinstance(value, str):
        raise TriggerValidationError(
            field, f"{value!r} is a Sleeper player id (a string); this route takes ESPN player ids (integers)"
        )
    if not isinstance(value, int) or value <= 0:
        raise TriggerValidationError(
            field, f"an ESPN player id (positive integer) is required, got {value!r}"
        )
    if value > MAX_ESPN_ID:
        raise TriggerValidationError(field, f"an ESPN player id is at most {MAX_ESPN_ID}, got {value}")
    return value


def sleeper_id(value: Any, field: str) -> str:
    """Return ``value`` as a Sleeper player id (a non-empty string); an ESPN integer id is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise TriggerValidationError(
            field, f"{value!r} is an ESPN player id (an integer); this message takes Sleeper ids (strings)"
        )
    if not isinstance(value, str) or not value.strip():
        raise TriggerValidationError(field, f"a Sleeper player id (string) is required, got {value!r}")
    return value


def text(value: Any, field: str) -> str:
    """Return a required non-empty string."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise TriggerValidationError(field, "is required")
    return storable_text(value, field)


def storable_text(value: Any, field: str) -> Any:
    """Return ``value`` when every string in it can be stored (``unstorable_text``), else refuse ``field``."""
    reason = unstorable_text(value)
    if reason:
        raise TriggerValidationError(field, reason)
    return value


def positive_int(value: Any, field: str) -> int:
    """Return a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TriggerValidationError(field, f"a positive integer is required, got {value!r}")
    return value


def optional_uuid(value: Any, field: str) -> str | None:
    """Return ``value`` as a canonical UUID string, or None."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise TriggerValidationError(field, f"not a tracking id (UUID): {value!r}") from None


def decision_inputs(value: Any) -> dict[str, Any]:
    """Return decision_inputs as a dict (season and week, when given, must be integers)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TriggerValidationError("decision_inputs", "must be an object")
    for name in ("season", "week"):
        v = value.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise TriggerValidationError(f"decision_inputs.{name}", f"must be an integer, got {v!r}")
    return dict(storable_text(value, "decision_inputs"))


def swaps(value: Any) -> list[dict[str, Any]]:
    """Return the lineup swaps: ``player_id`` (ESPN), ``to_slot`` and an optional ``kind`` (ir|lineup)."""
    if not isinstance(value, list) or not value:
        raise TriggerValidationError("swaps", "at least one swap is required")
    out = []
    for i, swap in enumerate(value):
        if not isinstance(swap, Mapping):
            raise TriggerValidationError(f"swaps[{i}]", "must be an object")
        unknown = set(swap) - SWAP_FIELDS
        if unknown:
            raise TriggerValidationError(f"swaps[{i}]", f"unknown fields {sorted(unknown)}")
        kind = swap.get("kind")
        if kind is not None and kind not in SWAP_KINDS:
            raise TriggerValidationError(f"swaps[{i}].kind", f"must be one of {sorted(SWAP_KINDS)}")
        entry = {
            "player_id": espn_id(swap.get("player_id"), f"swaps[{i}].player_id"),
            "to_slot": text(swap.get("to_slot"), f"swaps[{i}].to_slot"),
        }
        if kind is not None:
            entry["kind"] = kind
        out.append(entry)
    return out


def is_ir_swap(swap: Mapping[str, Any]) -> bool:
    """True for a swap that moves a player to injured reserve (kind ``ir`` or slot ``IR``)."""
    return swap.get("kind") == "ir" or str(swap.get("to_slot", "")).upper() == IR_SLOT


def published_swap(swap: Mapping[str, Any]) -> dict[str, Any]:
    """The swap as published: the request-only swap ``kind`` stripped."""
    return {"player_id": swap["player_id"], "to_slot": swap["to_slot"]}


#: Request fields core uses for its own decisions and never publishes.
REQUEST_ONLY_FIELDS = frozenset({"decision_inputs", "swap_kind", "after_tracking_id", "idempotency_key"})


def strip_request_only(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``payload`` without decision_inputs, swap kind, after_tracking_id and the key."""
    return {k: v for k, v in payload.items() if k not in REQUEST_ONLY_FIELDS}
