"""Turn a recorded match (its event log) into an is_test clone that srsim replays."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from config.clock import utcnow
from lifecycle.listener_run import validate_listener_settings
from lifecycle.match_ref import resolve_match
from listener.events import current_events, event_of, operation_of
from models.audit import AuditContext
from models.boundary import transaction
from models.db import connection_scope
from models.event_log import messages_of
from models.match import SRSIM_UNSERVED, create_match
from srsim.errors import SimulatorScriptError
from srsim.script import GameScript, save_script

logger = logging.getLogger(__name__)


def replay_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """What a clone replays of an archive: each event once, in its current state, at its first place.

    An event's later versions are folded into one message (``listener.events.current_events``)
    carrying its first message's operation (a ``create`` stays one, so a replay issues what the
    game issued); a deleted event is left out. Messages without an event id stay as they are and
    where they are; kickoff's markers and anything without a payload are not replayed, and
    kickoff's own annotations (``kickoff``: backfilled...) are dropped.
    """
    current = current_events(messages)
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("payload"), dict):
            continue
        event = event_of(message)
        if event is not None:
            event_id = event["id"]
            if event_id in placed or event_id not in current:
                continue
            placed.add(event_id)
            final = current[event_id]
            meta = final.get("metadata") if isinstance(final.get("metadata"), dict) else {}
            first = operation_of(message)
            operation = operation_of(final) if first == "delete" else first
            message = {**final, "metadata": {**meta, "operation": operation}}
        out.append({k: v for k, v in message.items() if k != "kickoff"})
    return out


def clone_match(
    source_ref: str,
    *,
    data_dir: Path,
    out: Path | None = None,
    start_after: float = 10.0,
    event_interval: float = 2.0,
    settings: dict[str, Any] | None = None,
    audit: AuditContext | None = None,
) -> tuple[Any, Path, int]:
    """Create an is_test Match copying the match ``source_ref`` names (internal id or sr_id, see
    lifecycle.match_ref) and a script replaying its logged events as the game finally was.

    Returns (the new Match, the script path, the number of events). Each event is replayed once,
    in its current state (``replay_messages``); synthetic kickoff markers are not replayed.
    ``settings`` (the clone body: listener settings such as ``listener_force_exit_code``) are
    validated against MatchListenerEnvironment and stored in the clone's
    ``listener_start_settings``. The clone is not dispatchable until an srsim serves
    its script (``srsim_unserved``, cleared by srsim when it starts the session). With ``audit``,
    the clone is audited (match.clone) in the insert's transaction.
    """
    validate_listener_settings(settings, source="the clone's --setting")

    with connection_scope(), transaction():
        source = resolve_match(source_ref)
        league = source.league
        events = replay_messages(messages_of(source.id))
        if not events:
            raise SimulatorScriptError(f"match {source.id}: its event log holds no events to replay")
        new_sr_id = str(uuid.uuid4())
        clone = create_match(
            sr_id=new_sr_id,
            league=league,
            title=f"clone of {source.title or source.sr_id}",
            scheduled=utcnow() + timedelta(seconds=start_after),
            status="scheduled",
            is_test=True,
            listener_start_settings={**(settings or {}), SRSIM_UNSERVED: True},
        )
        if audit is not None:
            audit.record(
                "match.clone",
                "match",
                str(clone.id),
                after={"source": str(source.id), "sr_id": new_sr_id, "settings": settings or {}},
            )
    game = GameScript(
        sr_id=new_sr_id,
        league=league.name,
        title=clone.title,
        is_test=True,
        start_after=start_after,
        event_interval=event_interval,
        events=events,
        event_count=len(events),
    )
    out = out or Path(data_dir) / "srsim" / f"{new_sr_id}.json"
    save_script(out, [game])
    logger.info(
        "match %s cloned from match %s (sr_id=%s) as sr_id=%s (%d events)",
        clone.id,
        source.id,
        source.sr_id,
        new_sr_id,
        len(events),
    )
    return clone, out, len(events)
