"""What identifies a feed message, and each event's current state as readers of an archive see it.

The archive records every distinct message once. A message's identity is its event id, its
operation and its version: ``payload.event.updated_at`` (or a delete's ``deleted`` time), else a
digest of the event's content, so a corrected copy without a timestamp is still a new version.
A message without an event id is identified by a digest of the whole message. The fields a feed
adds per delivery (``resume_id``, ``replay``; srsim's ``srsim_sent_at``) and kickoff's own
``kickoff`` annotations are no part of the identity: a resume replay or a play-by-play copy of a
recorded message is the same message.

Readers get each event's current state by id (``current_events``): a later version supersedes an
earlier one (by ``updated_at`` when both have one, else by archive order), a ``delete`` removes
the event. Kickoff's synthetic markers (``{"kickoff": {"marker": ...}}``) are not feed messages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

#: Top-level fields a feed or kickoff adds per delivery; never part of a message's identity.
DELIVERY_FIELDS = frozenset({"resume_id", "replay", "srsim_sent_at", "kickoff"})

#: The ``kickoff.backfilled`` value of a message recovered from the play-by-play / a resume replay.
FROM_PLAY_BY_PLAY = "play_by_play"
FROM_RESUME = "resume"

MessageKey = tuple[str, ...]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def event_of(message: Any) -> dict[str, Any] | None:
    """The message's ``payload.event`` when it has a non-empty string ``id``, else None."""
    if not isinstance(message, dict):
        return None
    payload = message.get("payload")
    event = payload.get("event") if isinstance(payload, dict) else None
    if isinstance(event, dict) and isinstance(event.get("id"), str) and event["id"]:
        return event
    return None


def operation_of(message: dict[str, Any]) -> str:
    """``metadata.operation`` (``create`` when absent)."""
    meta = message.get("metadata")
    op = meta.get("operation") if isinstance(meta, dict) else None
    return op if isinstance(op, str) and op else "create"


def category_of(message: dict[str, Any], event: dict[str, Any]) -> str:
    """The event's category: ``metadata.event_category``, else the event's own ``event_category``."""
    meta = message.get("metadata")
    category = meta.get("event_category") if isinstance(meta, dict) else None
    category = category or event.get("event_category") or ""
    return category if isinstance(category, str) else str(category)


def version_of(message: dict[str, Any], event: dict[str, Any]) -> str:
    """The event's version: ``updated_at``, a delete's ``deleted`` time, else a digest of its content."""
    for field in ("updated_at", "deleted"):
        value = event.get(field)
        if isinstance(value, str) and value:
            return value
    content = {k: v for k, v in event.items() if k != "event_category"}
    return "#" + _digest([content, category_of(message, event)])


def is_marker(message: Any) -> bool:
    """Whether this is one of kickoff's synthetic markers (a rain delay seen by a status check...)."""
    return (
        isinstance(message, dict)
        and isinstance(message.get("kickoff"), dict)
        and ("marker" in message["kickoff"])
    )


def message_key(message: Any) -> MessageKey | None:
    """The identity of a feed message (None for kickoff's markers and non-objects)."""
    if not isinstance(message, dict) or is_marker(message):
        return None
    event = event_of(message)
    if event is None:
        return ("message", _digest({k: v for k, v in message.items() if k not in DELIVERY_FIELDS}))
    op = operation_of(message)
    return ("event", event["id"], "delete" if op == "delete" else "upsert", version_of(message, event))


def backfilled_from(message: Any) -> str | None:
    """Where a recovered message came from (``play_by_play`` / ``resume``), None for a live one."""
    if not isinstance(message, dict):
        return None
    note = message.get("kickoff")
    source = note.get("backfilled") if isinstance(note, dict) else None
    return source if isinstance(source, str) else None


def _newer(candidate: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``candidate`` (later in the archive) supersedes ``current`` of the same event id."""
    new, old = candidate.get("updated_at"), current.get("updated_at")
    if isinstance(new, str) and isinstance(old, str) and new and old:
        return new >= old  # ISO 8601 texts of one feed compare in time order
    return True


def current_events(messages: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Each event's current state by id, in the order of its first appearance (deleted ones left out).

    The value is the whole message that holds the event's current version.
    """
    current: dict[str, dict[str, Any]] = {}
    deleted_at: dict[str, str] = {}
    for message in messages:
        event = event_of(message)
        if event is None:
            continue
        event_id = event["id"]
        if operation_of(message) == "delete":
            current.pop(event_id, None)
            deleted_at[event_id] = str(event.get("deleted") or "")
            continue
        if event_id in deleted_at:
            # Only a version stamped after the delete brings a deleted event back.
            stamp = event.get("updated_at")
            if not (isinstance(stamp, str) and deleted_at[event_id] and stamp > deleted_at[event_id]):
                continue
            del deleted_at[event_id]
        held = current.get(event_id)
        if held is None or _newer(event, held["payload"]["event"]):
            current[event_id] = message
    return current


#: ``EventIndex.add``'s key when the caller did not compute it.
_UNKNOWN = object()


class EventIndex:
    """What an archive holds, kept beside it: every message key, and each event id's current version.

    ``add`` is called for every message the archive records, in archive order, and says whether it
    was new; the listener records a message only when it is. Memory is one key per message.
    """

    def __init__(self) -> None:
        self.keys: set[MessageKey] = set()
        self.updated_at: dict[str, str | None] = {}  # event id -> updated_at of its current version
        self.first_seen: dict[str, int] = {}  # event id -> position of the message that brought it
        self.deleted: set[str] = set()
        self.messages = 0

    def __contains__(self, message: Any) -> bool:
        key = message_key(message)
        return key is not None and key in self.keys

    def add(self, message: Any, key: Any = _UNKNOWN) -> bool:
        """Index ``message`` (``key``: its ``message_key`` when the caller has it); False when an equal
        message is already indexed (it must not be recorded)."""
        if key is _UNKNOWN:
            key = message_key(message)
        if key is not None:
            if key in self.keys:
                return False
            self.keys.add(key)
            event = event_of(message)
            if event is not None:
                self._track(event, operation_of(message) == "delete")
        self.messages += 1
        return True

    def _track(self, event: dict[str, Any], delete: bool) -> None:
        event_id = event["id"]
        self.first_seen.setdefault(event_id, self.messages)
        if delete:
            self.deleted.add(event_id)
            self.updated_at.pop(event_id, None)
            return
        stamp = event.get("updated_at")
        stamp = stamp if isinstance(stamp, str) and stamp else None
        held = self.updated_at.get(event_id)
        if event_id not in self.updated_at or held is None or stamp is None or stamp >= held:
            self.updated_at[event_id] = stamp
        self.deleted.discard(event_id)

    def holds_current(self, event_id: str) -> bool:
        """Whether the event is in the archive and not deleted."""
        return event_id in self.updated_at

    def newer_than_held(self, event_id: str, updated_at: Any) -> bool:
        """Whether a version stamped ``updated_at`` is newer than the one held (True when none is held
        or either stamp is missing: the caller's message key then decides)."""
        held = self.updated_at.get(event_id)
        if held is None or not isinstance(updated_at, str) or not updated_at:
            return True
        return updated_at > held
