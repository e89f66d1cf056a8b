"""The errors of the player sync."""

from __future__ import annotations

from config.errors import ErrorKind, KickoffError


class PlayerSyncError(KickoffError):
    """Raised when the players map cannot be read: source unreachable, not JSON, or not a map of players."""

    kind = ErrorKind.FAILED
