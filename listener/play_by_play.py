"""A game's play-by-play from the provider's pull API, and the push-shaped messages a backfill records.

The URL is ``SPORTRADAR_BASE_URL`` + ``listener_play_by_play_paths[league]`` (else the league's
declared path, models.leagues; an undeclared league's ``listener_play_by_play_path``) with
``{league}``, ``{access}`` and ``{sr_id}`` filled in; it is
fetched with the API key in the ``x-api-key`` header and the stream's redirect and origin rules
(``listener.stream.feed_get``). The document may be flat (``{"game": {...}, "events": [...]}``,
what srsim serves) or nested the provider's way (``periods`` / ``innings`` / ``halfs`` each with
their ``events``): every object in a list named ``events``, at any depth, is one event, in document
order, which is game order. An event without an ``id`` makes the whole document unusable
(PlayByPlayError), as do a non-JSON body and an HTTP error: a backfill then retries.

``backfill_messages`` turns a play-by-play into the messages the archive lacks: each event whose
current version it does not hold becomes a push envelope marked ``{"kickoff": {"backfilled":
"play_by_play"}}`` (``create`` for an event the archive never had, ``update`` for a newer version),
and each event the archive held before the gap began that the play-by-play no longer lists
becomes a ``delete`` when the play-by-play is past it (it lists an event recorded after it: a
play-by-play that lags behind the push deletes nothing). A backfilled envelope carries no game
status: Match.status is never moved by a backfill (the schedule refresh and the live stream move it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import requests

from config.clock import utcnow
from config.settings import KickoffSettings, mask_url
from listener.errors import PlayByPlayError, StreamConnectionError, StreamDataError
from listener.events import FROM_PLAY_BY_PLAY, EventIndex
from listener.stream import feed_get
from models.leagues import declaration

logger = logging.getLogger(__name__)

#: Largest play-by-play document read (a long game's is a few MB).
MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PlayByPlay:
    """A game's play-by-play: its game object (without events) and its events in game order."""

    game: dict[str, Any]
    events: list[dict[str, Any]]


def play_by_play_url(settings: KickoffSettings, *, league: str, sr_id: str) -> str:
    """The play-by-play URL of one game (no key in it)."""
    decl = declaration(league)
    template = (
        settings.listener_play_by_play_paths.get(league.lower())
        or (decl.play_by_play_path if decl is not None else None)
        or settings.listener_play_by_play_path
    )
    path = template.format(league=league.lower(), access=settings.listener_sr_env, sr_id=sr_id)
    return f"{settings.sportradar_base_url.rstrip('/')}{path}"


def _events_in(node: Any) -> Iterator[Any]:
    """Every item of every list named ``events`` under ``node``, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "events" and isinstance(value, list):
                for item in value:
                    yield from _event_items(item)
            else:
                yield from _events_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _events_in(item)


def _event_items(item: Any) -> Iterator[Any]:
    """One listed event, unwrapped (the provider wraps some: ``{"at_bat": {...}}``), then the events
    it holds (an at-bat's pitches)."""
    if isinstance(item, dict) and "id" not in item and len(item) == 1:
        (inner,) = item.values()
        if isinstance(inner, dict):
            item = inner
    yield item
    if isinstance(item, dict) and isinstance(item.get("events"), list):
        for sub in item["events"]:
            yield from _event_items(sub)


def parse_play_by_play(body: Any) -> PlayByPlay:
    """Read a play-by-play document; PlayByPlayError when it is not one."""
    if not isinstance(body, dict):
        raise PlayByPlayError(f"play-by-play is not a JSON object ({type(body).__name__})")
    game = body.get("game") if isinstance(body.get("game"), dict) else {}
    events: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, item in enumerate(_events_in(body)):
        if not isinstance(item, dict):
            raise PlayByPlayError(f"play-by-play event {position} is not an object")
        event_id = item.get("id")
        if not isinstance(event_id, str) or not event_id:
            raise PlayByPlayError(f"play-by-play event {position} has no id")
        if event_id in seen:
            continue
        seen.add(event_id)
        events.append({k: v for k, v in item.items() if k != "events"})
    scalars = {k: v for k, v in game.items() if not isinstance(v, list)}  # not its periods / innings
    return PlayByPlay(game=scalars, events=events)


def fetch_play_by_play(
    session: requests.Session,
    url: str,
    *,
    api_key: str,
    timeout: tuple[float, float],
    match_id: str = "",
) -> PlayByPlay:
    """GET and read one play-by-play; PlayByPlayError for anything that is not a usable document."""
    try:
        resp, final = feed_get(
            session,
            url,
            api_key=api_key,
            accept="application/json",
            timeout=timeout,
            stream=False,
            what="play-by-play",
            match_id=match_id,
        )
    except (StreamConnectionError, StreamDataError) as exc:
        raise PlayByPlayError(f"play-by-play: {exc}") from exc
    with resp:
        if resp.status_code != 200:
            raise PlayByPlayError(f"play-by-play answered HTTP {resp.status_code} at {mask_url(final)}")
        if len(resp.content) > MAX_BYTES:
            raise PlayByPlayError(f"play-by-play at {mask_url(final)} is larger than {MAX_BYTES} bytes")
        try:
            body = resp.json()
        except ValueError as exc:
            raise PlayByPlayError(f"play-by-play at {mask_url(final)} is not JSON") from exc
    return parse_play_by_play(body)


def _envelope(event: dict[str, Any], *, sr_id: str, league: str, operation: str, at: str) -> dict[str, Any]:
    body = {k: v for k, v in event.items() if k != "event_category"}
    meta: dict[str, Any] = {
        "league": league.upper(),
        "match": f"sd:match:{sr_id}",
        "event_type": event.get("type") or event.get("event_type") or "",
        "operation": operation,
    }
    if event.get("event_category"):
        meta["event_category"] = event["event_category"]
    return {
        "payload": {"game": {"id": sr_id}, "event": body},
        "metadata": meta,
        "kickoff": {"backfilled": FROM_PLAY_BY_PLAY, "at": at},
    }


def backfill_messages(
    pbp: PlayByPlay, index: EventIndex, *, sr_id: str, league: str, held_before: int
) -> list[dict[str, Any]]:
    """The messages that bring the archive (``index``) up to ``pbp``, in game order.

    An event the archive holds in the same or a newer version is left out, and so is one the
    play-by-play gives without ``updated_at`` while the archive's version has one (the two cannot be
    ordered: the archive's stands), and one the live stream deleted (a play-by-play fetched before
    that delete still lists it). ``held_before``: how many messages the archive held when the
    oldest gap began; an event it held then that the play-by-play no longer lists, although the
    play-by-play lists an event the archive first saw after it (so the play-by-play is past it,
    not lagging behind), was deleted meanwhile: it gets a ``delete``.
    """
    at = utcnow().isoformat()
    out: list[dict[str, Any]] = []
    listed: set[str] = set()
    for event in pbp.events:
        event_id = event["id"]
        listed.add(event_id)
        if event_id in index.deleted:
            continue
        if index.holds_current(event_id):
            stamp = event.get("updated_at")
            if not (isinstance(stamp, str) and stamp) and index.updated_at.get(event_id) is not None:
                continue
            if not index.newer_than_held(event_id, stamp):
                continue
            message = _envelope(event, sr_id=sr_id, league=league, operation="update", at=at)
        else:
            message = _envelope(event, sr_id=sr_id, league=league, operation="create", at=at)
        if message not in index:
            out.append(message)
    reached = max((index.first_seen[e] for e in listed if e in index.first_seen), default=-1)
    for event_id, position in index.first_seen.items():
        if position < min(held_before, reached) and event_id not in listed and index.holds_current(event_id):
            gone = {"id": event_id, "deleted": at}
            out.append(_envelope(gone, sr_id=sr_id, league=league, operation="delete", at=at))
    return out
