"""Play-by-play from push messages: each event once, in its final version, deleted ones left out.

srsim's ``pbp.json`` route answers with ``final_events`` over the messages emitted so far; a
reader (a listener's backfill, a test) can apply it to the messages it received to compare.
"""

from __future__ import annotations

from typing import Any


def final_events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``payload.event`` of every message, each event id once in its last version, in game order.

    A later message with the same event id replaces the earlier version at the position of its
    first appearance; a message whose ``metadata.operation`` is ``delete`` removes the event (a
    later message with that id appears anew, at the end). Each event gets the message's
    ``metadata.event_category`` when it has none. Messages without an event (heartbeats, kickoff
    markers) are skipped; events without an id are kept, each once, where they came.
    """
    events: dict[Any, dict[str, Any]] = {}
    anonymous = 0
    for message in messages:
        payload = message.get("payload") if isinstance(message, dict) else None
        event = payload.get("event") if isinstance(payload, dict) else None
        if not isinstance(event, dict):
            continue
        meta = message.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        event_id = event.get("id")
        if event_id is None:
            anonymous += 1
            key: Any = ("anonymous", anonymous)
        else:
            key = ("id", str(event_id))
        if meta.get("operation") == "delete":
            events.pop(key, None)
            continue
        version = dict(event)
        if "event_category" not in version and meta.get("event_category") is not None:
            version["event_category"] = meta["event_category"]
        events[key] = version  # an existing key keeps its position
    return list(events.values())
