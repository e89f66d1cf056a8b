"""What a listener run knows about its match: the Match row or the injected settings, and the
game status a stream message carries."""

from __future__ import annotations

from dataclasses import dataclass

from config.errors import ConfigurationError
from listener.body import ListenerContext
from models.boundary import connection
from models.leagues import DEFAULT
from models.match import match_with_league


def _status_at(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return None
    status = obj.get("status")
    return status if isinstance(status, str) and status else None


def stream_status_of(message: dict) -> str | None:
    """An event's game status: ``payload.game.status``, then ``payload.status``, then the
    message's top-level ``game.status``, then its top-level ``status`` (never ``metadata``)."""
    payload = message.get("payload")
    for source in (
        payload.get("game") if isinstance(payload, dict) else None,
        payload,
        message.get("game"),
        message,
    ):
        status = _status_at(source)
        if status is not None:
            return status
    return None


@dataclass(frozen=True)
class MatchInfo:
    """What the body knows about its match at start."""

    sr_id: str
    league: str
    status: str | None  # None when there is no Match row (``kickoff listen`` of an unknown id)
    has_row: bool


def load_match_info(ctx: ListenerContext) -> MatchInfo:
    """The run's match: its Match row, else the injected settings (``kickoff listen`` of an unknown id).

    Call it under the process's database gate.
    """
    s = ctx.settings
    if ctx.match_id:
        with connection():
            match = match_with_league(ctx.match_id)
            if match is not None:
                # resolve_listener_environment injects both; without it the row decides both.
                injected = s.listener_sr_request_match_uuid is not None
                sr_id = s.listener_sr_request_match_uuid if injected else match.sr_id
                league = s.listener_sr_url_league if injected else match.league.name
                return MatchInfo(sr_id=sr_id, league=league, status=match.status, has_row=True)
    if not s.listener_sr_request_match_uuid:
        raise ConfigurationError(f"match {ctx.match_id!r} not found and listener_sr_request_match_uuid unset")
    return MatchInfo(
        sr_id=s.listener_sr_request_match_uuid,
        league=s.listener_sr_url_league or DEFAULT.name,
        status=None,
        has_row=False,
    )
