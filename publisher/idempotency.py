"""Idempotency keys: the builders callers use, the season/week suffix and the release rule.

Each trigger queue's release TTL is part of its declaration (``publisher.trigger_queues``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from models.activity import PENDING_STATUSES, ActionStatus


def _sha256(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _swap_sort_key(swap: Mapping[str, Any]) -> str:
    return json.dumps(swap, sort_keys=True, separators=(",", ":"))


def lineup_key(
    *, job_name: str, team: str, season: int | None, week: int | None, swaps: Iterable[Mapping[str, Any]]
) -> str:
    """``lineup-<team>-<hash>``: SHA-256 of the Job name, team, season, week and the sorted swaps.

    The Job name (from the CronJob's downward API) makes each new Job publish, while pod
    retries inside one Job share the key. Always a key: without season and week (either one
    missing) the hash covers the Job name, team and sorted swaps only, so pod retries of one Job
    still publish once (and no ``:s<season>w<week>`` suffix is stored).
    """
    ordered = sorted((dict(s) for s in swaps), key=_swap_sort_key)
    parts: dict[str, Any] = {"job": job_name, "team": str(team), "swaps": ordered}
    if season is not None and week is not None:
        parts |= {"season": season, "week": week}
    return f"lineup-{team}-{_sha256(parts)}"


def waiver_key(
    *,
    team: str,
    season: int | None,
    week: int | None,
    add_player_id: int,
    drop_player_id: int | None,
    ir_player_id: int | None = None,
) -> str | None:
    """``waiver-<team>-<hash>``: SHA-256 of team, season, week, add, drop and the chained IR player.

    No Job name: a claim stays queued on ESPN until waivers run, so any re-run that week must
    dedupe. Returns None (send no key) when season or week is missing.
    """
    if season is None or week is None:
        return None
    digest = _sha256(
        {
            "team": str(team),
            "season": season,
            "week": week,
            "add": add_player_id,
            "drop": drop_player_id,
            "ir": ir_player_id,
        }
    )
    return f"waiver-{team}-{digest}"


def draft_key(*, league_id: str, pick_number: int, espn_id: int) -> str:
    """``<league_id>:<pick_number>:<espn_id>``."""
    return f"{league_id}:{pick_number}:{espn_id}"


def effective_key(key: str | None, decision_inputs: Mapping[str, Any] | None) -> str | None:
    """The stored key: ``key`` plus ``:s<season>w<week>`` when decision_inputs has both.

    So a week-old key cannot swallow next week's action. None stays None (no key).
    """
    if key is None:
        return None
    inputs = decision_inputs or {}
    season, week = inputs.get("season"), inputs.get("week")
    if season is None or week is None:
        return key
    return f"{key}:s{season}w{week}"


def key_is_released(*, status: str, created_at: datetime, ttl: timedelta, now: datetime) -> bool:
    """True when a key may be used again: its action finished and the TTL since it was created passed.

    An action still queued, delivered or running keeps its key however old.
    """
    if ActionStatus(status) in PENDING_STATUSES:
        return False
    return now - created_at >= ttl
