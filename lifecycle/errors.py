"""The errors of the listener control plane: match and league admin, starts, bulk acts, schedules,
verification outside a listener."""

from __future__ import annotations

from config.errors import (
    AlreadyExists,
    ConfigurationError,
    ErrorKind,
    KickoffError,
    NotFound,
    ServiceUnavailable,
)
from models.errors import ListenerError


class LeagueNotFound(NotFound):
    """Raised when no League has the given name."""


class MatchExists(AlreadyExists):
    """Raised when a match to add has the sr_id of a match kickoff knows."""


class LeagueExists(AlreadyExists):
    """Raised when a league to add has the name (in any case) of a league kickoff knows."""


class InvalidMatchEdit(KickoffError, ValueError):
    """Raised when a match edit names an unknown status, one of kickoff's bookkeeping keys, or a
    setting the match does not have to unset; nothing was changed (422). ``field`` names the input."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ListenerStartSettingsError(ListenerError):
    """Raised when start-time settings (overrides, Match.listener_start_settings) are invalid.

    A failed start: counted by the attempt counter like any other failure.
    """

    kind = ErrorKind.INVALID


class ListenerHeld(ListenerError):
    """Raised by ``kickoff listen`` when another listener already holds the match (nothing was started).

    ``holder`` describes it: ``record_id``, ``host`` and ``pid`` of its open row, or the start
    lock's ``token``, or ``pending`` when only a queued start is known.
    """

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str, *, holder: dict[str, object]) -> None:
        super().__init__(message)
        self.holder = holder


class StartAttemptsExhausted(ListenerError):
    """Raised when a plain (not forced) start is asked for a match whose failed starts reached the
    attempt cap: a worker would skip it, so nothing is enqueued (HTTP 409, CLI exit 4). The
    message names ``--force``, which clears the attempts.
    """

    kind = ErrorKind.CONFLICT


class ListenerRunFailed(ListenerError):
    """Raised by the start_match_listener actor when a run ended with a failure exit (9, 11, 12, 16, ...).

    The failure is already recorded (row exit code, attempt counter); raising marks the Dramatiq
    message failed (it is not retried: max_retries=0).
    """


class StartGivenBack(ListenerError):
    """Raised by a start that did nothing because PostgreSQL or Redis did not answer before it took
    the match's start lock, or before its run under the lock began (RunNotBegun): its message goes
    back to the queue (the start_match_listener actor retries it within seconds,
    lifecycle.guarded_start) for a worker that reaches both. Not a failed start: nothing is counted.
    """

    kind = ErrorKind.UNAVAILABLE


class RunNotBegun(ListenerError):
    """Raised by a listener run (lifecycle.listener_run) whose own first work, under the start lock it
    was given, met PostgreSQL or Redis unreachable: reading its match or writing its row (the
    server at its connection limit, a cut). Its body never ran; its row was not written, or the
    write's answer was lost. ``cause``: the ServiceUnavailable it met. The start gives its message
    back as one cut before its lock does (lifecycle.guarded_start); not a failed start.
    """

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, match_id: str, cause: ServiceUnavailable) -> None:
        super().__init__(f"match {match_id}: the run could not begin: {cause}")
        self.cause = cause


class WorkerLeaseUnavailable(ListenerError):
    """Raised when a listener run cannot start because its worker process holds no lease.

    The lease (lifecycle.lease) could not be taken or renewed: Redis does not answer. A failed
    start, counted like any other.
    """

    kind = ErrorKind.UNAVAILABLE


class PlayByPlayUnavailable(ServiceUnavailable):
    """Raised when a verification or backfill outside a listener cannot get the game's play-by-play:
    the feed (SPORTRADAR_BASE_URL) does not answer (HTTP 503, CLI exit 5); nothing was stored."""

    kind = ErrorKind.UNAVAILABLE

    def __init__(self, reason: str, *, address: str = "") -> None:
        super().__init__(
            service="the feed's play-by-play", setting="SPORTRADAR_BASE_URL", address=address, reason=reason
        )


class PlayByPlayUnusable(PlayByPlayUnavailable):
    """Raised when the feed (SPORTRADAR_BASE_URL) answers a play-by-play kickoff cannot use (an HTTP
    error, not JSON, events without ids): HTTP 502, CLI exit 5; nothing was stored."""

    kind = ErrorKind.UPSTREAM


class BulkError(ListenerError):
    """Base class of the refusals of a bulk listener action (lifecycle.bulk); nothing was changed."""

    field: str | None = None


class BulkInvalid(BulkError, ValueError):
    """Raised when a bulk action is asked without what it needs: a reason, a known action, a filter
    naming a league or match ids (HTTP 422, CLI usage error); ``field`` names the field."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class BulkConflict(BulkError):
    """Raised when a bulk action cannot go on in the current state (HTTP 409, CLI exit 4): the filter
    matches more matches than one bulk act may touch, or the confirm is unknown, expired, already
    used or was issued for another action, filter or caller (preview again)."""

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ScheduleFetchError(KickoffError):
    """Raised when the feed's schedule API or a league document (hierarchy, teams, seasons) cannot be
    reached, answers an HTTP error, or answers something unreadable (not a JSON object, no league id)."""

    kind = ErrorKind.FAILED


class InvalidLeagueName(ConfigurationError, ValueError):
    """Raised when a league name cannot be an archive directory ({DATA_DIR}/listener/{league})."""

    kind = ErrorKind.INVALID  # an operator's or a feed's name, not a setting


class BackfillNotSent(KickoffError):
    """The sweep could not enqueue a backfill (its broker did not take it): set aside, never raised."""

    kind = ErrorKind.UNAVAILABLE
