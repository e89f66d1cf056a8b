"""The errors of a match listener's body: its push stream, the play-by-play, its archive."""

from __future__ import annotations

from config.errors import ErrorKind
from models.errors import ListenerError


class StreamError(ListenerError):
    """Base class of the errors of a match listener's push stream."""


class StreamConnectionError(StreamError):
    """Raised when the push stream cannot be (re)connected or times out after every reconnect (exit 12)."""


class StreamDataError(StreamError):
    """Raised when the feed answers an HTTP error or data the listener cannot skip (exit 11)."""


class StreamResumeRefused(StreamConnectionError):
    """Raised when the feed refuses a reconnect's resume id (HTTP 410: window passed, too many missed,
    unknown id): the listener reconnects without it and backfills from the play-by-play."""


class PlayByPlayError(StreamError):
    """Raised when a game's play-by-play cannot be fetched or read (HTTP error, not JSON, events without
    ids): the backfill logs it, retries with backoff and never stops the live stream."""


class ArchiveBusy(ListenerError):
    """Raised when a backfill outside a listener is asked for a match a listener may still own: it has
    an open lifecycle row or its start lock is held (HTTP 409, CLI exit 4); nothing was written."""

    kind = ErrorKind.CONFLICT


class ArchivePathError(ListenerError):
    """Raised when a league or shortcode would place a listener archive outside DATA_DIR (exit 11)."""

    kind = ErrorKind.NOT_FOUND
