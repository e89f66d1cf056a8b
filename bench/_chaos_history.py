"""The history a chaos run records, and the checker that judges it (pure: no service, no clock).

``bench/chaos.py`` records, in ``time.monotonic()`` seconds of the one machine everything runs on
(the same clock in every process; lifecycle rows carry PostgreSQL's times, compared only with
each other):

* every stream connection srsim served (``Connection``: per match, who connected - the ``via``
  tag of the worker's base URL, ``/_via/{tag}`` - and when it opened and closed, srsim's side);
* every lifecycle row as seen by a poll each second (``RowState``; its times are PostgreSQL's);
* every archive's fencing sidecar and size, polled (``ArchiveSample``), and at the end each
  archive compared with srsim's whole game (``ArchiveResult``);
* every fault the nemesis injected (``FaultRecord``: when, on which host, which workers it froze,
  whether it cut the host's feed by a black hole).

``check(history, bound_seconds=...)`` returns a ``Verdict``: the violations of

* ``two-streams``: two connections of one match open at once for longer than
  ``OVERLAP_TOLERANCE_SECONDS``, not counting the time either side could not stream: its worker
  frozen by a pause (until ``FROZEN_GRACE_SECONDS`` after the SIGCONT), or its host's feed
  black-holed (packets dropped both ways), until the close its client sent into the black hole
  can have reached srsim: TCP retransmits it at the next backoff step after the heal, up to the
  cut's length later (``blackhole_close_seconds``);
* ``row-open-beside-successor`` / ``row-written-after-successor`` / ``row-reopened``: a lifecycle
  row not closed by the time its match's next row was created, one whose heartbeat or close came
  after that, and a row seen closed and later seen open (or closed again at another time);
* ``fence-token-decreased`` / ``fence-token-unknown``: an archive's sidecar token going down, or
  naming no run of the match;
* ``archive-differs``: an archive that lacks, adds or holds another version of srsim's events,
  or holds one message twice;
* ``slow-recovery`` / ``not-recovered``: a stretch without a stream that ended (or was still on at
  the game's end) more than ``bound_seconds`` after the heal of the faults that caused it (on the
  host that streamed the match, or a Redis restart), not counting the time when every host had a
  fault on or just healed (``check_recovery``).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: Two connections of one match may overlap this long (a close crossing the fault proxy's poll).
OVERLAP_TOLERANCE_SECONDS = 0.5
#: A resumed worker may keep its frozen connection this long after SIGCONT (it is fenced first).
FROZEN_GRACE_SECONDS = 2.0


#: After a fault heals, its host may need this long before it can take matches over (a restarted
#: worker boots; after a Redis restart the reaper judges no lease for a lease and a renewal).
SETTLE_SECONDS = 12.0
#: A stream may end this long after the fault that ended it started (a kill's socket close).
CAUSE_LAG_SECONDS = 1.0


def blackhole_close_seconds(cut_seconds: float) -> float:
    """After a black hole of ``cut_seconds`` heals, how long a close sent into it may take to reach
    srsim: TCP's retransmission backoff doubles from 0.2 s, so its next step comes up to about the
    time already waited (at most 30 s here), plus the proxy's poll."""
    return min(cut_seconds, 30.0) + FROZEN_GRACE_SECONDS


@dataclass(frozen=True)
class Connection:
    """One stream connection srsim served for match ``sr_id``."""

    sr_id: str
    via: str  # the worker's tag ("" when it gave none)
    host: int | None  # the host of ``via``
    opened: float
    closed: float | None  # None: still open when recorded


@dataclass(frozen=True)
class RowState:
    """A lifecycle row (match_listener_records) as one poll saw it."""

    row_id: str
    sr_id: str
    created_at: float
    heartbeat_at: float | None
    ended_at: float | None
    fence_token: int | None
    exit_code: int | None
    seen_at: float


@dataclass(frozen=True)
class ArchiveSample:
    """An archive's fencing sidecar token and size at one poll."""

    sr_id: str
    at: float
    token: int | None
    size: int


@dataclass(frozen=True)
class ArchiveResult:
    """A match's archive against srsim's whole game (event ids)."""

    sr_id: str
    events: int
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.differing or self.duplicates)


@dataclass(frozen=True)
class FaultRecord:
    """A fault as the nemesis injected it: started, healed (== started: instantaneous)."""

    kind: str
    started: float
    healed: float
    host: int | None = None
    frozen: tuple[str, ...] = ()  # via tags of the workers a pause stopped
    feed_blackholed: bool = False  # the host's feed was cut by a black hole


@dataclass
class History:
    """Everything a run recorded; ``started``: every match streamed; ``game_ends``: srsim's last event."""

    started: float
    game_ends: dict[str, float]
    connections: list[Connection] = field(default_factory=list)
    rows: list[RowState] = field(default_factory=list)
    archive_samples: list[ArchiveSample] = field(default_factory=list)
    archives: list[ArchiveResult] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    hosts: int = 0  # test hosts (0: those the faults and connections name)


@dataclass
class Verdict:
    violations: list[dict[str, Any]]
    events_missing: int
    max_takeover_seconds: float
    max_unstreamed_seconds: float
    max_takeover_by_fault: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


Interval = tuple[float, float]


def _subtract(span: Interval, holes: list[Interval]) -> list[Interval]:
    """``span`` less every interval of ``holes``."""
    pieces = [span]
    for h0, h1 in holes:
        out = []
        for a, b in pieces:
            if h1 <= a or h0 >= b:
                out.append((a, b))
                continue
            if a < h0:
                out.append((a, h0))
            if h1 < b:
                out.append((h1, b))
        pieces = out
    return pieces


def _union(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _muted(history: History, *, closing: bool) -> tuple[dict[str, list[Interval]], dict[int, list[Interval]]]:
    """When each via could not stream (frozen), and when each host's feed swallowed every byte;
    ``closing``: extended by the time a close may take to reach srsim after the heal."""
    frozen: dict[str, list[Interval]] = defaultdict(list)
    blackholed: dict[int, list[Interval]] = defaultdict(list)
    for fault in history.faults:
        for via in fault.frozen:
            frozen[via].append((fault.started, fault.healed + (FROZEN_GRACE_SECONDS if closing else 0.0)))
        if fault.feed_blackholed and fault.host is not None:
            grace = blackhole_close_seconds(fault.healed - fault.started) if closing else 0.0
            blackholed[fault.host].append((fault.started, fault.healed + grace))
    return frozen, blackholed


def _live_spans(conn: Connection, end: float, muted: tuple[dict, dict]) -> list[Interval]:
    """When ``conn`` could deliver events: open, its worker not frozen, its host's feed not black-holed."""
    frozen, blackholed = muted
    holes = list(frozen.get(conn.via, []))
    if conn.host is not None:
        holes += blackholed.get(conn.host, [])
    closed = conn.closed if conn.closed is not None else end
    return _subtract((conn.opened, closed), holes) if closed > conn.opened else []


def _end_of(history: History) -> float:
    return max(history.game_ends.values(), default=history.started)


def check_streams(history: History) -> list[dict[str, Any]]:
    """``two-streams`` violations: per match, overlapping live spans of two connections."""
    muted = _muted(history, closing=True)
    end = _end_of(history)
    by_match: dict[str, list[Connection]] = defaultdict(list)
    for conn in history.connections:
        by_match[conn.sr_id].append(conn)
    out = []
    for sr_id, conns in sorted(by_match.items()):
        spans = [(c, _live_spans(c, end, muted)) for c in sorted(conns, key=lambda c: c.opened)]
        for i, (a, a_spans) in enumerate(spans):
            for b, b_spans in spans[i + 1 :]:
                both = 0.0
                first = None
                for a0, a1 in a_spans:
                    for b0, b1 in b_spans:
                        lo, hi = max(a0, b0), min(a1, b1)
                        if hi > lo:
                            both += hi - lo
                            first = lo if first is None else min(first, lo)
                if both > OVERLAP_TOLERANCE_SECONDS:
                    out.append(
                        {
                            "kind": "two-streams",
                            "sr_id": sr_id,
                            "vias": [a.via, b.via],
                            "at": round(first or 0.0, 3),
                            "seconds": round(both, 3),
                        }
                    )
    return out


def check_rows(history: History) -> list[dict[str, Any]]:
    """Row violations: open beside, or written after, its successor's start; reopened."""
    seen: dict[str, list[RowState]] = defaultdict(list)
    for state in sorted(history.rows, key=lambda r: r.seen_at):
        seen[state.row_id].append(state)
    out: list[dict[str, Any]] = []
    for row_id, states in seen.items():
        closed_at = None
        for state in states:
            if closed_at is not None and state.ended_at != closed_at:
                out.append(
                    {
                        "kind": "row-reopened",
                        "sr_id": state.sr_id,
                        "row": row_id,
                        "closed_at": closed_at,
                        "then": state.ended_at,
                        "seen_at": state.seen_at,
                    }
                )
                break
            if state.ended_at is not None:
                closed_at = state.ended_at
    last = {row_id: states[-1] for row_id, states in seen.items()}
    by_match: dict[str, list[RowState]] = defaultdict(list)
    for state in last.values():
        by_match[state.sr_id].append(state)
    for sr_id, rows in sorted(by_match.items()):
        rows.sort(key=lambda r: r.created_at)
        for prev, nxt in itertools.pairwise(rows):
            if prev.ended_at is None or prev.ended_at > nxt.created_at:
                out.append(
                    {
                        "kind": "row-open-beside-successor",
                        "sr_id": sr_id,
                        "row": prev.row_id,
                        "successor": nxt.row_id,
                        "ended_at": prev.ended_at,
                        "successor_created_at": nxt.created_at,
                    }
                )
            elif prev.heartbeat_at is not None and prev.heartbeat_at > nxt.created_at:
                out.append(
                    {
                        "kind": "row-written-after-successor",
                        "sr_id": sr_id,
                        "row": prev.row_id,
                        "successor": nxt.row_id,
                        "heartbeat_at": prev.heartbeat_at,
                        "successor_created_at": nxt.created_at,
                    }
                )
    return out


def check_fences(history: History) -> list[dict[str, Any]]:
    """Each archive's sidecar token never goes down and always names a run of its match."""
    tokens: dict[str, set[int]] = defaultdict(set)
    for state in history.rows:
        if state.fence_token is not None:
            tokens[state.sr_id].add(state.fence_token)
    out: list[dict[str, Any]] = []
    last: dict[str, int] = {}
    unknown: set[tuple[str, int]] = set()
    for sample in sorted(history.archive_samples, key=lambda s: s.at):
        if sample.token is None:
            continue
        before = last.get(sample.sr_id)
        if before is not None and sample.token < before:
            out.append(
                {
                    "kind": "fence-token-decreased",
                    "sr_id": sample.sr_id,
                    "from": before,
                    "to": sample.token,
                    "at": sample.at,
                }
            )
        last[sample.sr_id] = max(sample.token, before or sample.token)
        known = tokens.get(sample.sr_id)
        if known and sample.token not in known and (sample.sr_id, sample.token) not in unknown:
            unknown.add((sample.sr_id, sample.token))
            out.append({"kind": "fence-token-unknown", "sr_id": sample.sr_id, "token": sample.token})
    return out


def check_archives(history: History) -> list[dict[str, Any]]:
    out = []
    for result in history.archives:
        if not result.ok:
            out.append(
                {
                    "kind": "archive-differs",
                    "sr_id": result.sr_id,
                    "events": result.events,
                    "missing": len(result.missing),
                    "extra": len(result.extra),
                    "differing": len(result.differing),
                    "duplicates": len(result.duplicates),
                    "first_missing": result.missing[:5],
                }
            )
    return out


def _holders(history: History) -> dict[str, list[tuple[float, int | None]]]:
    """Per match, the end of each live span with the host that streamed it."""
    muted = _muted(history, closing=False)
    end = _end_of(history)
    out: dict[str, list[tuple[float, int | None]]] = defaultdict(list)
    for conn in history.connections:
        out[conn.sr_id] += [(b, conn.host) for _, b in _live_spans(conn, end, muted)]
    return out


def unstreamed(history: History) -> dict[str, list[Interval]]:
    """Per match, the stretches from ``started`` to its game's end when no connection could stream."""
    muted = _muted(history, closing=False)
    end = _end_of(history)
    by_match: dict[str, list[Interval]] = defaultdict(list)
    for conn in history.connections:
        by_match[conn.sr_id] += _live_spans(conn, end, muted)
    out = {}
    for sr_id, game_end in history.game_ends.items():
        live = _union(by_match.get(sr_id, []))
        out[sr_id] = [g for g in _subtract((history.started, game_end), live) if g[1] > g[0]]
    return out


def _all_impaired(history: History) -> list[Interval]:
    """When no host could take a match over: every host had a fault on, or healed less than
    ``SETTLE_SECONDS`` ago (a global fault - a Redis restart - counts on every host)."""
    hosts = sorted(
        {f.host for f in history.faults if f.host is not None}
        | {c.host for c in history.connections if c.host is not None}
    )
    if history.hosts:
        hosts = list(range(history.hosts))
    if not hosts:
        return []
    impaired: dict[int, list[Interval]] = {h: [] for h in hosts}
    for fault in history.faults:
        span = (fault.started, fault.healed + SETTLE_SECONDS)
        for host in hosts if fault.host is None else [fault.host]:
            impaired.setdefault(host, []).append(span)
    common = _union(impaired[hosts[0]])
    for host in hosts[1:]:
        theirs = _union(impaired[host])
        common = [
            (max(a0, b0), min(a1, b1)) for a0, a1 in common for b0, b1 in theirs if min(a1, b1) > max(a0, b0)
        ]
    return common


def _capable_seconds(span: Interval, all_impaired: list[Interval]) -> float:
    return sum(b - a for a, b in _subtract(span, all_impaired))


def _caused_until(history: History, g0: float, holder: int | None) -> tuple[float, FaultRecord | None]:
    """When the faults that caused a gap starting at ``g0`` on host ``holder`` healed, and the last
    of them: those on that host (or on none) on at ``g0`` or healed just before, then each
    partition of that host (or Redis restart) that began before the ones so far healed (the host
    stayed cut). A worker's own fault (kill, pause, skew, deploy) later on excuses nothing."""
    faults = sorted(
        (f for f in history.faults if f.host is None or holder is None or f.host == holder),
        key=lambda f: f.started,
    )
    since, cause = g0, None
    for fault in faults:  # on when the gap began (or just healed)
        on = fault.started <= g0 + CAUSE_LAG_SECONDS and fault.healed + SETTLE_SECONDS >= g0
        if on and (cause is None or fault.healed > cause.healed):
            since, cause = max(g0, fault.healed), fault
    grew = cause is not None
    while grew:  # the host's link cut again before it healed: one longer cut
        grew = False
        for fault in faults:
            linked = fault.kind.startswith("partition") or fault.host is None
            if linked and fault.started <= since + CAUSE_LAG_SECONDS and fault.healed > since:
                since, cause, grew = fault.healed, fault, True
    return since, cause


def check_recovery(
    history: History, *, bound_seconds: float
) -> tuple[list[dict[str, Any]], float, float, dict[str, float]]:
    """Recovery violations, the worst takeover, the longest stretch without a stream, and the worst
    takeover per kind of the fault that caused it (``none``: no fault did).

    A stretch without a stream of a match starting at ``g0`` is caused by the faults on the host
    that streamed it until then (or on no host: a Redis restart) that were on at ``g0`` or healed
    less than ``SETTLE_SECONDS`` before, and partitions of that host that started before they
    healed (``_caused_until``); its takeover is the time from the last of their heals (or
    ``g0``) until the match streams again, less the time when no host at all could take it over
    (``_all_impaired``). A fault on another host does not excuse it.
    """
    all_impaired = _all_impaired(history)
    holders = _holders(history)
    out = []
    worst_takeover = worst_gap = 0.0
    by_kind: dict[str, float] = {}
    for sr_id, gaps in sorted(unstreamed(history).items()):
        game_end = history.game_ends[sr_id]
        for g0, g1 in gaps:
            worst_gap = max(worst_gap, g1 - g0)
            ended = [host for end, host in holders.get(sr_id, []) if abs(end - g0) < 0.01]
            holder = ended[0] if ended else None
            since, cause = _caused_until(history, g0, holder)
            takeover = _capable_seconds((since, g1), all_impaired) if g1 > since else 0.0
            kind = cause.kind if cause is not None else "none"
            by_kind[kind] = round(max(by_kind.get(kind, 0.0), takeover), 2)
            worst_takeover = max(worst_takeover, takeover)
            if takeover > bound_seconds:
                out.append(
                    {
                        "kind": "not-recovered" if g1 >= game_end else "slow-recovery",
                        "sr_id": sr_id,
                        "from": round(g0, 3),
                        "to": round(g1, 3),
                        "host": holder,
                        "cause": kind,
                        "cause_healed": None if cause is None else round(cause.healed, 3),
                        "seconds": round(takeover, 3),
                    }
                )
    return out, worst_takeover, worst_gap, by_kind


def check(history: History, *, bound_seconds: float) -> Verdict:
    """Every check over ``history``; ``bound_seconds``: the takeover bound after a fault or a heal."""
    recovery, takeover, gap, by_kind = check_recovery(history, bound_seconds=bound_seconds)
    violations = (
        check_streams(history)
        + check_rows(history)
        + check_fences(history)
        + check_archives(history)
        + recovery
    )
    return Verdict(
        violations=violations,
        events_missing=sum(len(a.missing) for a in history.archives),
        max_takeover_seconds=round(takeover, 2),
        max_unstreamed_seconds=round(gap, 2),
        max_takeover_by_fault=by_kind,
    )
