"""A match's archive against the provider's play-by-play: verify it, and backfill it when no listener runs.

``verify_match_archive`` reads the match's event log (models.event_log: what every run on every
host recorded; none yet is an empty one), fetches the
game's play-by-play with the process settings (SPORTRADAR_BASE_URL, SPORTRADAR_API_KEY,
LISTENER_SR_ENV, LISTENER_PLAY_BY_PLAY_PATH(S)), compares the two (listener.verify) and stores
the outcome on the Match row (listener.verify_store). ``backfill_match_archive`` first merges
what the archive lacks (listener.backfill.merge), then verifies: it is for a match whose last
run was abandoned after the game closed, and refuses (ArchiveBusy) while a listener may record
the match (an open lifecycle row, a held start lock); it holds the start lock itself
meanwhile, so no listener starts during it. A play-by-play that cannot be had is
PlayByPlayUnavailable (the feed does not answer) or PlayByPlayUnusable (it answers something
else); nothing is stored then.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests

from config.errors import LockNotOwned
from config.settings import KickoffSettings, mask_url
from lifecycle.errors import PlayByPlayUnavailable, PlayByPlayUnusable
from lifecycle.match_ref import resolve_match
from listener import log_writer
from listener.backfill import merge
from listener.errors import ArchiveBusy, PlayByPlayError, StreamConnectionError
from listener.event_log import EventLog
from listener.play_by_play import PlayByPlay, fetch_play_by_play, play_by_play_url
from listener.verify import Verification, compare
from listener.verify_store import record_verification
from models.audit import AuditContext
from models.coordination import CoordinationStore
from models.event_log import messages_of
from models.listener_record import has_open_run
from models.match import Match

if TYPE_CHECKING:
    from prometheus_client import Counter

logger = logging.getLogger(__name__)

#: The counter's name as Prometheus exposes it (with ``_total``).
FAILED_METRIC = "kickoff_archive_verification_failures_total"


@functools.cache
def verification_failures() -> Counter:
    """This process's count of verifications that found the archive and the play-by-play apart
    (made on first use, as config.set_aside's counter)."""
    # prometheus_client picks its (multiprocess) value class when first imported: a worker sets
    # PROMETHEUS_MULTIPROC_DIR (its Prometheus middleware) after importing this module
    from prometheus_client import Counter  # noqa: PLC0415

    return Counter(
        FAILED_METRIC.removesuffix("_total"),
        "Archive verifications run by this process that found missing, extra or differing events.",
    )


@dataclass(frozen=True)
class ArchiveVerification:
    """One verification of a match's archive (and, after a backfill, how many events it merged)."""

    match_id: str
    sr_id: str
    archive: str  # where the record is: the event log of the match
    verification: Verification
    backfilled: int = 0

    @property
    def ok(self) -> bool:
        return self.verification.ok

    def as_dict(self) -> dict[str, Any]:
        """``{"ok", "missing", "extra", "differing", "events"}`` with the full id lists."""
        return self.verification.as_dict()


def _archive_of(match: Match) -> str:
    return f"event log of match {match.id}"


def fetch_match_play_by_play(match: Match, *, settings: KickoffSettings) -> PlayByPlay:
    """The match's play-by-play; PlayByPlayUnavailable / PlayByPlayUnusable when it cannot be had."""
    url = play_by_play_url(settings, league=match.league.name, sr_id=match.sr_id)
    with requests.Session() as session:
        try:
            return fetch_play_by_play(
                session,
                url,
                api_key=settings.sportradar_api_key.get_secret_value(),
                timeout=(settings.listener_connect_timeout_seconds, settings.listener_read_timeout_seconds),
                match_id=str(match.id),
            )
        except PlayByPlayError as exc:
            logger.warning("match %s play-by-play not usable: %s", match.id, exc)
            cls = (
                PlayByPlayUnavailable
                if isinstance(exc.__cause__, StreamConnectionError)
                else PlayByPlayUnusable
            )
            raise cls(str(exc), address=mask_url(settings.sportradar_base_url)) from exc


def _verify(match: Match, pbp: PlayByPlay, *, backfilled: int = 0) -> ArchiveVerification:
    verification = compare(messages_of(match.id), pbp)
    record_verification(str(match.id), verification)
    if not verification.ok:
        verification_failures().inc()
    return ArchiveVerification(
        match_id=str(match.id),
        sr_id=match.sr_id,
        archive=_archive_of(match),
        verification=verification,
        backfilled=backfilled,
    )


def verify_match_archive(
    match_ref: str, *, settings: KickoffSettings, audit: AuditContext | None = None
) -> ArchiveVerification:
    """Compare the archive of the match ``match_ref`` names with its play-by-play; store the outcome.

    With ``audit``, the verification is audited (archive.verify) before the provider is called.
    """
    match = resolve_match(match_ref)
    if audit is not None:
        audit.record("archive.verify", "match", str(match.id))
    pbp = fetch_match_play_by_play(match, settings=settings)
    return _verify(match, pbp)


def _has_open_row(match_id: str) -> bool:
    return has_open_run(uuid.UUID(match_id))


def backfill_match_archive(
    match_ref: str,
    *,
    settings: KickoffSettings,
    coordination: CoordinationStore,
    audit: AuditContext | None = None,
) -> ArchiveVerification:
    """Merge what the match's archive lacks from its play-by-play, then verify and store the outcome.

    Refused (ArchiveBusy) while the match has an open lifecycle row or its start lock is held;
    the start lock is held by this backfill (token ``backfill:...``) until it is done. With
    ``audit``, the backfill is audited (match.backfill) before anything else: an entry that cannot be
    written refuses it.
    """
    match = resolve_match(match_ref)
    mid = str(match.id)
    if audit is not None:
        audit.record("match.backfill", "match", mid)
    lock = coordination.locks.start_lock(mid)
    if not lock.acquire(f"backfill:{uuid.uuid4()}"):
        holder = coordination.locks.start_lock_holder(mid)
        raise ArchiveBusy(f"match {mid}: its start lock is held ({holder}): a listener owns the archive")
    try:
        if _has_open_row(mid):
            raise ArchiveBusy(f"match {mid} has an open lifecycle row: a listener owns the archive")
        pbp = fetch_match_play_by_play(match, settings=settings)
        writer = log_writer.writer(buffer_limit=50_000, retry_seconds=1.0)  # the process's one writer
        log = EventLog(match_id=mid, writer=writer, wait_seconds=30.0)
        log.open()
        merged = merge(pbp, log, sr_id=match.sr_id, league=match.league.name, held_before=log.count)
        log.close()
        logger.info("match %s event log backfilled from the play-by-play: %d messages", mid, merged)
        return _verify(match, pbp, backfilled=merged)
    finally:
        with contextlib.suppress(LockNotOwned):
            lock.release()
