"""The nemesis's fault schedule of ``bench/chaos.py``: a pure function of the seed and the run's shape.

``plan(seed, minutes=M, hosts=H)`` draws every fault from ``random.Random(seed)`` alone, so the
same arguments give the same schedule (printed by the bench, and in its ``--json``). Faults
arrive as a Poisson process (mean ``mean_gap_seconds`` apart) over the run, each of a kind drawn
uniformly from ``FAULT_KINDS``; those that last (pauses, partitions, skews, a supervisor's restart
delay, Redis's down time) may overlap the next ones. Every fault is healed by the end of the run,
so what follows it measures recovery.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Every kind of fault the nemesis injects.
FAULT_KINDS = (
    "kill",
    "pause",
    "partition-redis",
    "partition-postgres",
    "partition-feed",
    "partition-all",
    "redis-restart",
    "clock-skew",
    "deploy",
)
#: The services each partition cuts a host from (the harness's names).
PARTITION_SERVICES = {
    "partition-redis": ("redis",),
    "partition-postgres": ("database",),
    "partition-feed": ("feed",),
    "partition-all": ("redis", "database", "broker", "feed"),
}
#: How a partition cuts: packets dropped with connections left open, or connections refused.
PARTITION_MODES = ("blackhole", "refuse")
#: Kinds aimed at one worker of a host (the others at a whole host, redis-restart at no host).
WORKER_KINDS = frozenset({"kill", "pause", "clock-skew"})


@dataclass(frozen=True)
class Fault:
    """One fault: ``at`` seconds into the run, healed ``seconds`` later (0: instantaneous)."""

    at: float
    kind: str
    host: int | None  # None: not aimed at a host (redis-restart)
    worker: int | None  # a worker slot on ``host`` (kill, pause, clock-skew)
    seconds: float  # pause/partition/skew length; kill: restart delay; redis-restart: down time
    mode: str | None = None  # partitions: "blackhole" | "refuse"
    skew_seconds: float = 0.0  # clock-skew: the offset of the worker's clock

    @property
    def heals_at(self) -> float:
        return self.at + self.seconds

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and (k != "skew_seconds" or v)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, hosts: int, workers_per_host: int) -> Fault:
        """A fault as ``as_dict`` wrote it (a run's JSON ``schedule``, a schedule file); ValueError
        naming what is wrong (an unknown kind or mode, a host or worker the run has not, a missing
        or negative time)."""
        known = {"at", "kind", "host", "worker", "seconds", "mode", "skew_seconds"}
        if not isinstance(raw, dict) or set(raw) - known:
            raise ValueError(f"a fault is an object with keys among {sorted(known)}: {raw!r}")
        kind = raw.get("kind")
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (one of {', '.join(FAULT_KINDS)})")
        host, worker, mode = raw.get("host"), raw.get("worker"), raw.get("mode")
        try:
            at, seconds = float(raw["at"]), float(raw.get("seconds", 0.0))
            skew = float(raw.get("skew_seconds", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{kind}: 'at' and 'seconds' are seconds: {raw!r}") from exc
        if at < 0 or seconds < 0:
            raise ValueError(f"{kind}: 'at' and 'seconds' are not negative: {raw!r}")
        if (kind == "redis-restart") != (host is None):
            raise ValueError(f"{kind}: {'no' if kind == 'redis-restart' else 'a'} host: {raw!r}")
        if host is not None and not (isinstance(host, int) and 0 <= host < hosts):
            raise ValueError(f"{kind}: host {host!r} is not one of the run's {hosts} hosts")
        if (kind in WORKER_KINDS) != (worker is not None):
            raise ValueError(f"{kind}: {'a' if kind in WORKER_KINDS else 'no'} worker: {raw!r}")
        if worker is not None and not (isinstance(worker, int) and 0 <= worker < workers_per_host):
            raise ValueError(f"{kind}: worker {worker!r} is not one of a host's {workers_per_host}")
        if (kind in PARTITION_SERVICES) != (mode is not None) or (
            mode is not None and mode not in PARTITION_MODES
        ):
            raise ValueError(f"{kind}: mode {mode!r} (a partition's is one of {', '.join(PARTITION_MODES)})")
        return cls(at, kind, host, worker, seconds, mode, skew)

    def describe(self) -> str:
        """One line: ``  12.3 s  partition-feed host 1 (blackhole) for 17.0 s``."""
        target = "" if self.host is None else f" host {self.host}"
        if self.worker is not None:
            target += f" worker {self.worker}"
        extra = f" ({self.mode})" if self.mode else ""
        if self.skew_seconds:
            extra += f" ({self.skew_seconds:+.0f} s)"
        length = f" for {self.seconds:.1f} s" if self.seconds else ""
        return f"{self.at:7.1f} s  {self.kind}{target}{extra}{length}"


def _round(value: float) -> float:
    return round(value, 1)


def plan(
    seed: int,
    *,
    minutes: float,
    hosts: int,
    workers_per_host: int = 2,
    lease_seconds: float = 8.0,
    mean_gap_seconds: float = 10.0,
    first_at: float = 5.0,
    kinds: tuple[str, ...] = FAULT_KINDS,
) -> list[Fault]:
    """The faults of a run of ``minutes`` over ``hosts`` hosts, in time order (pure: same args, same list).

    A pause lasts past every lease (1.5 to 2.25 leases); a partition 6 to 30 s; a clock skew
    (±1 to ±10 minutes) 20 to 60 s; a killed worker is restarted 1 to 5 s later; a restarted
    Redis is down 0.5 to 3 s. Durations are cut so that every fault heals by the run's end.
    """
    if hosts < 1 or workers_per_host < 1:
        raise ValueError("a run needs at least one host with one worker")
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {sorted(unknown)} (known: {', '.join(FAULT_KINDS)})")
    rng = random.Random(seed)
    end = minutes * 60.0
    faults: list[Fault] = []
    at = first_at
    while at < end - 1.0:
        kind = kinds[rng.randrange(len(kinds))]
        host = rng.randrange(hosts) if kind != "redis-restart" else None
        worker = rng.randrange(workers_per_host) if kind in WORKER_KINDS else None
        mode = None
        skew = 0.0
        if kind == "kill":
            seconds = rng.uniform(1.0, 5.0)
        elif kind == "pause":
            seconds = lease_seconds * rng.uniform(1.5, 2.25)
        elif kind in PARTITION_SERVICES:
            seconds = rng.uniform(6.0, 30.0)
            mode = PARTITION_MODES[rng.randrange(len(PARTITION_MODES))]
        elif kind == "redis-restart":
            seconds = rng.uniform(0.5, 3.0)
        elif kind == "clock-skew":
            seconds = rng.uniform(20.0, 60.0)
            skew = rng.choice((-1, 1)) * rng.uniform(60.0, 600.0)
        else:  # deploy: instantaneous (the restart takes what it takes)
            seconds = 0.0
        seconds = max(0.0, min(seconds, end - at))
        faults.append(
            Fault(
                at=_round(at),
                kind=kind,
                host=host,
                worker=worker,
                seconds=_round(seconds),
                mode=mode,
                skew_seconds=_round(skew),
            )
        )
        at += rng.expovariate(1.0 / mean_gap_seconds)
    return faults


def counts(faults: list[Fault]) -> dict[str, int]:
    """Faults per kind, every kind listed (0 for those the schedule has none of)."""
    out = dict.fromkeys(FAULT_KINDS, 0)
    for fault in faults:
        out[fault.kind] += 1
    return out


def load(path: Path, *, hosts: int, workers_per_host: int) -> list[Fault]:
    """The faults of a schedule file (a JSON list, as a run's ``--json`` prints its ``schedule``), in
    time order; ValueError naming the file and what is wrong."""
    try:
        raw = json.loads(path.read_text())
        if not isinstance(raw, list):
            raise ValueError("a schedule is a JSON list of faults")
        faults = [Fault.from_dict(item, hosts=hosts, workers_per_host=workers_per_host) for item in raw]
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return sorted(faults, key=lambda f: f.at)
