"""The per-match event archive ``{DATA_DIR}/listener/{league}/{shortcode}.json`` and its text log.

One file per match, a JSON array with one event per line::

    [
    {"payload": ...}
    ,{"payload": ...}
    ]

Events are written as they arrive (or in batches when ``flush_events`` > 1); after every write
the file is valid JSON (the closing ``]`` is rewritten behind the new events). A restart
reopens the same file and appends.
Fencing: a run given a fencing token (models.fence) writes it, when it opens the archive, to the
sidecar ``{archive}.fence``; every flush takes an exclusive ``flock`` on the sidecar, re-reads it
and refuses (FencedWrite, nothing written) when it holds a newer run's token. Opening takes the
same lock, so a successor's token lands between two flushes of its predecessor, never inside one.
(The lock is on the sidecar, not the archive, because a repair replaces the archive file.)
A file cut mid-write (kill -9) is repaired on reopen: complete event lines are kept, the partial
last one is dropped. League and shortcode are sanitised; a value that still points outside
``DATA_DIR`` (``..``, separators, empty) is refused with ArchivePathError.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from config.clock import utcnow
from listener.errors import ArchiveBusy, ArchivePathError
from listener.events import EventIndex
from models.errors import FencedWrite

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_MAX_COMPONENT = 120
_EMPTY = b"[\n]\n"
#: How long opening an archive waits for its fence lock (a flush of a process paused mid-write holds it).
FENCE_LOCK_WAIT_SECONDS = 30.0


def fence_path(archive: Path) -> Path:
    """The sidecar holding the fencing token of the newest run that opened ``archive``."""
    return archive.with_name(archive.name + ".fence")


def safe_component(value: str, *, what: str) -> str:
    """Return ``value`` usable as one path component under DATA_DIR, or raise ArchivePathError.

    ``:`` and other harmless characters become ``_``; separators, ``..``, a leading dot, an
    empty value or an over-long one are refused (they can only come from a broken or hostile feed).
    """
    raw = (value or "").strip()
    if not raw or "/" in raw or "\\" in raw or ".." in raw or raw.startswith(".") or "\x00" in raw:
        raise ArchivePathError(f"refusing {what} {value!r}: not a safe archive path component")
    cleaned = _UNSAFE.sub("_", raw)
    if len(cleaned) > _MAX_COMPONENT:
        raise ArchivePathError(f"refusing {what} {value!r}: longer than {_MAX_COMPONENT} characters")
    return cleaned


def shortcode_for(sr_id: str) -> str:
    """The archive name of a match: its Sportradar id, sanitised (``sr:match:1`` → ``sr_match_1``)."""
    return safe_component(sr_id, what="shortcode")


def archive_dir(data_dir: Path | str, league: str) -> Path:
    """``{DATA_DIR}/listener/{league}``, checked to stay inside DATA_DIR."""
    root = (Path(data_dir) / "listener").resolve()
    path = (root / safe_component(league.lower(), what="league")).resolve()
    if root not in path.parents:
        raise ArchivePathError(f"refusing league {league!r}: resolves outside {root}")
    return path


def archive_path(data_dir: Path | str, league: str, shortcode: str) -> Path:
    """``{DATA_DIR}/listener/{league}/{shortcode}.json``, checked to stay inside DATA_DIR."""
    directory = archive_dir(data_dir, league)
    path = (directory / f"{safe_component(shortcode, what='shortcode')}.json").resolve()
    if path.parent != directory:
        raise ArchivePathError(f"refusing shortcode {shortcode!r}: resolves outside {directory}")
    return path


def read_events(path: Path | str) -> list[Any]:
    """Read an archive's events, tolerating a file cut mid-write (the partial line is ignored)."""
    data = Path(path).read_bytes()
    try:
        events = json.loads(data)
        if isinstance(events, list):
            return events
    except ValueError:
        pass
    return _scan_lines(data)[0]


def _scan_lines(data: bytes) -> tuple[list[Any], list[bytes]]:
    """Parse event lines one by one; stop at the first partial or unreadable line."""
    events: list[Any] = []
    good: list[bytes] = []
    lines = data.split(b"\n")
    if not lines or lines[0].strip() != b"[":
        return events, good
    for raw in lines[1:]:
        line = raw[1:] if raw.startswith(b",") else raw
        if not line.strip() or line.strip() == b"]":
            if line.strip() == b"]":
                break
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            break
        good.append(line)
    return events, good


class EventArchive:
    """Appends one match's events to its archive file with buffered, always-valid flushes."""

    def __init__(
        self,
        path: Path,
        *,
        flush_events: int = 1,
        flush_seconds: float = 0.5,
        match_id: str = "",
        fence_token: int | None = None,
    ) -> None:
        self.path = path
        self.match_id = match_id
        self.fence_token = fence_token  # None: never fenced (a dry run, a backfill outside a run)
        self.fenced = False  # a newer run's token was found: nothing more is written
        self.flush_events = flush_events
        self.flush_seconds = flush_seconds
        self.count = 0  # events in the file plus the buffer
        self.repaired = False
        self.index = EventIndex()  # every message recorded, so none is recorded twice
        self.last_written_at: float | None = None  # the file's mtime when opened (None: new file)
        self._buffer: list[bytes] = []
        self._first_buffered_at = 0.0
        self._fh: Any = None
        self._end = 0  # offset of the closing "]\n"
        self._fence_fd: int | None = None

    # -- open / repair -------------------------------------------------------------

    def open(self) -> EventArchive:
        """Open (creating, or repairing a cut file) and position for appending; claim the fence first."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.fence_token is not None and self._fence_fd is None:
            self._fence_fd = os.open(fence_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            with self._fence("open", claim=True):
                self._open_file()
        except BaseException:
            self._close_fence()
            raise
        return self

    def _open_file(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.write_bytes(_EMPTY)
        else:
            self.last_written_at = self.path.stat().st_mtime
        data = self.path.read_bytes()
        if not self._is_clean(data):
            self._repair(data)
            data = self.path.read_bytes()
        self._fh = open(self.path, "r+b", buffering=0)  # noqa: SIM115 - held for the whole game
        self._end = len(data) - 2

    # -- fencing -------------------------------------------------------------------------

    def _read_fence(self) -> int | None:
        assert self._fence_fd is not None
        text = os.pread(self._fence_fd, 64, 0).strip()
        try:
            return int(text) if text else None
        except ValueError:
            return None

    def _lock_fence(self, *, wait: bool) -> None:
        assert self._fence_fd is not None
        if not wait:
            fcntl.flock(self._fence_fd, fcntl.LOCK_EX)
            return
        deadline = time.monotonic() + FENCE_LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(self._fence_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ArchiveBusy(
                        f"match {self.match_id}: archive {self.path} is locked by another run's write"
                    ) from None
                time.sleep(0.05)

    @contextlib.contextmanager
    def _fence(self, what: str, *, claim: bool = False) -> Iterator[None]:
        """Hold the fence lock; FencedWrite when a newer run's token is there (``claim``: write ours)."""
        if self._fence_fd is None or self.fence_token is None:
            yield
            return
        if self.fenced:
            raise self._refused(what, None)
        self._lock_fence(wait=claim)
        try:
            current = self._read_fence()
            if current is not None and current > self.fence_token:
                self.fenced = True
                self._buffer.clear()  # never written by this run: a successor owns the archive
                raise self._refused(what, current)
            if claim and current != self.fence_token:
                data = f"{self.fence_token}\n".encode()
                os.pwrite(self._fence_fd, data, 0)
                os.ftruncate(self._fence_fd, len(data))
            yield
        finally:
            fcntl.flock(self._fence_fd, fcntl.LOCK_UN)

    def _refused(self, what: str, current: int | None) -> FencedWrite:
        newer = f" (the archive's is {current})" if current is not None else ""
        logger.warning(
            "match %s archive %s refused: fencing token %s is no longer the newest%s",
            self.match_id,
            what,
            self.fence_token,
            newer,
        )
        return FencedWrite(
            f"match {self.match_id}: archive {what} refused: fencing token {self.fence_token} "
            f"is no longer the newest{newer}"
        )

    def _close_fence(self) -> None:
        if self._fence_fd is not None:
            os.close(self._fence_fd)
            self._fence_fd = None

    def _is_clean(self, data: bytes) -> bool:
        if not data.startswith(b"[\n") or not data.endswith(b"]\n"):
            return False
        try:
            events = json.loads(data)
        except ValueError:
            return False
        if not isinstance(events, list):
            return False
        self._index(events)
        return True

    def _index(self, events: list[Any]) -> None:
        self.count = len(events)
        self.index = EventIndex()
        for event in events:
            self.index.add(event)

    def _repair(self, data: bytes) -> None:
        events, good = _scan_lines(data)
        logger.warning(
            "match %s archive %s was cut mid-write: kept %d complete events, dropped the partial tail",
            self.match_id,
            self.path,
            len(events),
        )
        body = b"[\n" + b"".join((b"" if i == 0 else b",") + line + b"\n" for i, line in enumerate(good))
        tmp = self.path.with_suffix(".json.repair")
        tmp.write_bytes(body + b"]\n")
        os.replace(tmp, self.path)
        self._index(events)
        self.repaired = True

    # -- append ----------------------------------------------------------------------

    def record(self, message: Any, raw: bytes | None = None) -> bool:
        """Buffer one feed message unless an equal one is recorded already (``listener.events``); True
        when it was new. ``raw``: its one-line JSON text as received (else it is serialised)."""
        if not self.index.add(message):
            return False
        if raw is None:
            self.append(message, indexed=True)
        else:
            self.append_raw(raw)
        return True

    def messages(self) -> list[Any]:
        """Every event of the file, flushed first."""
        self.flush()
        return read_events(self.path)

    def record_unreadable(self, raw: bytes, why: str) -> None:
        """A file archive keeps only JSON messages: an unreadable line is logged, not written."""
        logger.warning(
            "match %s: unreadable stream line (%s, %d bytes) not archived", self.match_id, why, len(raw)
        )

    def append_raw(self, line: bytes) -> None:
        """Buffer one event given as a one-line JSON text (already validated and indexed by the caller)."""
        if not self._buffer:
            self._first_buffered_at = time.monotonic()
        self._buffer.append(line)
        self.count += 1
        if len(self._buffer) >= self.flush_events:
            self.flush()

    def append(self, event: Any, *, indexed: bool = False) -> None:
        """Buffer one event (serialised compactly on one line)."""
        if not indexed:
            self.index.add(event)
        self.append_raw(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())

    def append_marker(self, kind: str, **fields: Any) -> None:
        """Write a synthetic kickoff marker (e.g. a rain delay seen by a status check) and flush."""
        self.append({"kickoff": {"marker": kind, "at": utcnow().isoformat(), **fields}})
        self.flush()

    def maybe_flush(self) -> None:
        """Flush when the oldest buffered event has waited ``flush_seconds``."""
        if self._buffer and time.monotonic() - self._first_buffered_at >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Write buffered events behind the last one and re-close the array (FencedWrite once fenced)."""
        if not self._buffer or self._fh is None:
            return
        with self._fence("flush"):
            self._write_buffer()

    def _write_buffer(self) -> None:
        first_in_file = self.count - len(self._buffer) == 0
        parts = []
        for i, line in enumerate(self._buffer):
            parts.append(line if (first_in_file and i == 0) else b"," + line)
        chunk = b"\n".join(parts) + b"\n"
        self._buffer.clear()
        self._fh.seek(self._end)
        self._fh.write(chunk + b"]\n")
        self._end += len(chunk)

    def close(self) -> None:
        """Flush, fsync and close the file (a fenced run's buffer is dropped, FencedWrite raised)."""
        if self._fh is None:
            self._close_fence()
            return
        try:
            self.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
            self._fh = None
            self._close_fence()


class TextLog:
    """The human-readable log of one listener run: ``{shortcode}.{record_id[:8]}.log`` next to the archive.

    Opened per line (a game writes few lines), so a thousand listeners do not hold a thousand files.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._made = False

    @classmethod
    def for_run(cls, archive: Path, record_id: str | None) -> TextLog:
        if not record_id:
            return cls(None)
        name = f"{archive.stem}.{safe_component(str(record_id)[:8], what='record id')}.log"
        return cls(archive.parent / name)

    def write(self, message: str, *args: object) -> None:
        if self.path is None:
            return
        text = message % args if args else message
        if not self._made:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._made = True
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{utcnow().isoformat()} {text}\n")
