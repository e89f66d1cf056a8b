"""Operating the match event log: importing a DATA_DIR's archive files, and pruning by age (audited).

``import_archives`` loads the ``{shortcode}.json`` files of ``{DATA_DIR}/listener/{league}/`` into
the log (each distinct message once: a file read twice, or a message a listener logged already,
adds nothing), one file at a time so an interrupted import resumes where it stopped.
``prune_event_log`` deletes what arrived more than DAYS ago, refused while a match of that range is
live, and audits it (``events.prune``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from config.clock import utcnow
from listener.archive import read_events, shortcode_for
from listener.errors import ArchiveBusy, ArchivePathError
from listener.event_log import stored_form
from listener.events import FROM_PLAY_BY_PLAY, FROM_RESUME, backfilled_from, is_marker, message_key
from models.audit import AuditContext
from models.boundary import transaction
from models.event_log import (
    CHUNK,
    NewRow,
    Pruned,
    insert_events,
    key_text,
    live_matches_before,
    match_names,
    prune_before,
)

logger = logging.getLogger(__name__)


@dataclass
class ImportSummary:
    """What ``import_archives`` did: messages loaded, already there, unreadable; files without a match."""

    files: int = 0
    loaded: int = 0
    already: int = 0
    unreadable: int = 0
    unknown: list[str] = field(default_factory=list)  # files whose match kickoff does not know

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def archive_files(data_dir: Path) -> list[Path]:
    """The archive files under ``{data_dir}/listener/*/``, in name order."""
    return sorted((Path(data_dir) / "listener").glob("*/*.json"))


def _kind(message: Any) -> str:
    if is_marker(message):
        return "marker"
    source = backfilled_from(message)
    return {FROM_RESUME: "resumed", FROM_PLAY_BY_PLAY: "backfilled"}.get(source or "", "imported")


def _rows(match_id: str, messages: list[Any], summary: ImportSummary) -> list[NewRow]:
    rows = []
    for message in messages:
        if not isinstance(message, dict):
            summary.unreadable += 1
            continue
        key = message_key(message) or ("marker", repr(sorted(message.get("kickoff", {}).items())))
        text, raw = stored_form(message) if not is_marker(message) else (_json(message), None)
        rows.append(
            NewRow(match_id=match_id, message_key=key_text(key), kind=_kind(message), message=text, raw=raw)
        )
    return rows


def _json(value: Any) -> str:

    return json.dumps(value, separators=(",", ":"), default=str)


def import_archives(data_dir: Path, *, progress: Callable[[Path], None] | None = None) -> ImportSummary:
    """Load every archive file of ``data_dir`` into the event log; ``progress`` is called per file."""
    summary = ImportSummary()
    by_name: dict[tuple[str, str], str] = {}
    for match_id, sr_id, league in match_names():
        try:
            by_name[(league.lower(), shortcode_for(sr_id))] = match_id
        except ArchivePathError:  # an sr_id no file could be named after
            continue
    for path in archive_files(data_dir):
        summary.files += 1
        match_id = by_name.get((path.parent.name, path.stem))
        if match_id is None:
            summary.unknown.append(str(path))
        else:
            try:
                messages = read_events(path)
            except (OSError, ValueError) as exc:
                logger.warning("event import: %s unreadable: %s", path, exc)
                summary.unreadable += 1
                messages = []
            rows = _rows(match_id, messages, summary)
            for start in range(0, len(rows), CHUNK):
                outcome = insert_events(rows[start : start + CHUNK])
                summary.loaded += len(outcome.logged)
                summary.already += len(rows[start : start + CHUNK]) - len(outcome.logged)
        if progress is not None:
            progress(path)
    return summary


def prune_event_log(days: int, *, audit: AuditContext) -> Pruned:
    """Delete the messages that arrived more than ``days`` ago (ArchiveBusy while a match of that range is
    live: a live or delayed status, or an open lifecycle row); audited as ``events.prune``."""
    cutoff = utcnow() - timedelta(days=days)
    live = live_matches_before(cutoff)
    if live:
        raise ArchiveBusy(
            f"refusing to prune: {len(live)} match(es) of that range are live ({', '.join(live[:5])})"
        )
    with transaction():
        pruned = prune_before(cutoff)
        audit.record(
            "events.prune",
            "event_log",
            None,
            after={
                "older_than_days": days,
                "cutoff": cutoff.isoformat(),
                "events": pruned.events,
                "keys": pruned.keys,
                "partitions": list(pruned.partitions),
            },
        )
    return pruned
