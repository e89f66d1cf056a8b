"""Comparing an archive with the provider's play-by-play: the events missing, extra and differing.

The archive's side is each event's current state (``listener.events.current_events``: updates
applied, deletes removed); the play-by-play's side is its event list (final versions). An event
differs when its version does not match: ``updated_at`` when both sides have one, else its
content and category (``updated_at`` left out: one side may not carry it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from listener.events import current_events, event_of, version_of
from listener.play_by_play import PlayByPlay

#: Ids listed per kind in a stored or printed verification (the counts are always complete).
LISTED_IDS = 100


@dataclass(frozen=True)
class Verification:
    """The outcome of one comparison."""

    missing: list[str]  # in the play-by-play, not in the archive
    extra: list[str]  # in the archive (current state), not in the play-by-play
    differing: list[str]  # in both, in another version
    events: int  # events the play-by-play lists

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.differing)

    def as_dict(self, *, limit: int | None = None) -> dict[str, Any]:
        """``{"ok", "missing", "extra", "differing", "events"}``; ``limit`` cuts each id list (counts
        then come as ``missing_count``...)."""
        out: dict[str, Any] = {"ok": self.ok, "events": self.events}
        for name in ("missing", "extra", "differing"):
            ids = getattr(self, name)
            out[name] = ids if limit is None else ids[:limit]
            if limit is not None:
                out[f"{name}_count"] = len(ids)
        return out


def _same_version(held: dict[str, Any], event: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether the archive's current ``event`` (in message ``held``) is the play-by-play's ``want``: by
    ``updated_at`` when both have one, else by content and category (``updated_at`` left out)."""
    have, expect = event.get("updated_at"), want.get("updated_at")
    if isinstance(have, str) and have and isinstance(expect, str) and expect:
        return have == expect
    strip = {"updated_at"}
    return version_of(held, {k: v for k, v in event.items() if k not in strip}) == version_of(
        {}, {k: v for k, v in want.items() if k not in strip}
    )


def compare(messages: Iterable[Any], pbp: PlayByPlay) -> Verification:
    """Compare the archive's ``messages`` (in archive order) with ``pbp``."""
    current = current_events(messages)
    expected = {event["id"]: event for event in pbp.events}
    missing = [event_id for event_id in expected if event_id not in current]
    extra = [event_id for event_id in current if event_id not in expected]
    differing = []
    for event_id, want in expected.items():
        held = current.get(event_id)
        if held is None:
            continue
        event = event_of(held)
        assert event is not None
        if not _same_version(held, event, want):
            differing.append(event_id)
    return Verification(missing=missing, extra=extra, differing=differing, events=len(expected))
