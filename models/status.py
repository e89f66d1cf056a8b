"""Match.status rules as pure functions: the schedule refresh (freeze, heal) and the push stream.

The feeds' status vocabulary, by phase:

================  =====================================================================
phase             statuses
================  =====================================================================
pre-game          scheduled, created, time-tbd
live              inprogress, halftime
delayed           delayed, wdelay (weather), fdelay (facility), odelay (other), suspended
terminal          complete, closed, cancelled, postponed, unnecessary
================  =====================================================================

``suspended`` (MLB: stopped, to be resumed later) counts as delayed: the game is not over
and must not look upcoming again. ``postponed`` is terminal for this match id: the provider
re-issues a postponed game under a new id. Any other string is unknown: it is logged and the
local status kept, so it never reaches Match.status.
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum

from config.clock import ensure_utc

logger = logging.getLogger(__name__)


class Phase(StrEnum):
    """Where a status puts a game."""

    PREGAME = "pregame"  # not started; the schedule may still move
    LIVE = "live"  # being played
    DELAYED = "delayed"  # started or due, interrupted; will resume, be postponed or cancelled
    TERMINAL = "terminal"  # over for this match id; never reopened


PREGAME = frozenset({"scheduled", "created", "time-tbd"})
LIVE = frozenset({"inprogress", "halftime"})
DELAYED = frozenset({"delayed", "wdelay", "fdelay", "odelay", "suspended"})
TERMINAL = frozenset({"complete", "closed", "cancelled", "postponed", "unnecessary"})
KNOWN = PREGAME | LIVE | DELAYED | TERMINAL

_PHASES = (
    {s: Phase.PREGAME for s in PREGAME}
    | {s: Phase.LIVE for s in LIVE}
    | {s: Phase.DELAYED for s in DELAYED}
    | {s: Phase.TERMINAL for s in TERMINAL}
)

#: Statuses the dispatcher always selects (the game is on).
DISPATCH_ALWAYS = LIVE
#: Statuses the dispatcher selects when ``scheduled`` is inside its window.
DISPATCH_IN_WINDOW = PREGAME | DELAYED


def phase_of(status: str | None) -> Phase | None:
    """Return the phase of a status string, or None when it is not in the vocabulary."""
    if status is None:
        return None
    return _PHASES.get(status.strip().lower())


def normalise(status: str | None) -> str | None:
    """Return the status lower-cased and stripped if it is known, else None."""
    if status is None:
        return None
    s = status.strip().lower()
    return s if s in KNOWN else None


def refreshed_status(
    local: str,
    incoming: str,
    *,
    has_in_game_questions: bool,
    scheduled: datetime,
    now: datetime,
) -> str:
    """Return the status a schedule refresh persists (Match.refreshed_status).

    Freeze: a live or terminal row never goes back to pre-game, a terminal row never
    reopens, and never goes back to an earlier terminal status (``closed`` → ``complete``, as
    the stream rule refuses too). Heal: a row still pre-game or delayed whose schedule still
    says pre-game, that already has in-game questions and whose start is past, becomes
    ``inprogress`` (never ``closed``). Otherwise the provider is trusted.
    """
    new = normalise(incoming)
    if new is None:
        logger.warning("schedule refresh: unknown status %r ignored; keeping %r", incoming, local)
        return local
    cur_phase = phase_of(local)
    new_phase = phase_of(new)
    if cur_phase is None:
        return new
    if cur_phase is Phase.TERMINAL:
        if new_phase is not Phase.TERMINAL or is_later_terminal(new, normalise(local)):
            return local
        return new
    if cur_phase is Phase.LIVE and new_phase is Phase.PREGAME:
        return local
    if (
        cur_phase in (Phase.PREGAME, Phase.DELAYED)
        and new_phase is Phase.PREGAME
        and has_in_game_questions
        and ensure_utc(now, what="now") > ensure_utc(scheduled, what="scheduled")
    ):
        return "inprogress"
    return new


#: Terminal statuses a game passes through in this order (the provider's game over, then its
#: statistics final): a terminal status moves only to a later one of these. The other terminal
#: statuses (cancelled, postponed, unnecessary) are final.
TERMINAL_SEQUENCE = ("complete", "closed")


def is_later_terminal(local: str | None, new: str | None) -> bool:
    """Whether terminal ``new`` comes after terminal ``local`` (``complete`` → ``closed``)."""
    if local not in TERMINAL_SEQUENCE or new not in TERMINAL_SEQUENCE:
        return False
    return TERMINAL_SEQUENCE.index(new) > TERMINAL_SEQUENCE.index(local)


def apply_stream_status(local: str, incoming: str) -> str:
    """Return the status a push-stream event persists (Match.apply_stream_status).

    The stream never writes a pre-game status and never reopens a terminal game; a terminal
    game moves only to a later terminal status (``complete`` → ``closed``). Live, delayed and
    terminal statuses from the stream are otherwise trusted.
    """
    new = normalise(incoming)
    if new is None:
        logger.warning("push stream: unknown status %r ignored; keeping %r", incoming, local)
        return local
    if phase_of(new) is Phase.PREGAME:
        return local
    if phase_of(local) is Phase.TERMINAL:
        return new if is_later_terminal(normalise(local), new) else local
    return new
