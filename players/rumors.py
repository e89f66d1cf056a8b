"""rumor-action: turn rumor signals into moves sent through the lineup and waiver triggers.

The rules (a signal below RUMOR_MIN_CONFIDENCE is ignored):

1. ``ruled_out`` on a rostered starter: bench him (a lineup swap to ``BE``).
2. ``season_ending`` on a rostered player with a ``replacement_player_id``: move him to IR
   (lineup, swap kind ``ir``), then claim the replacement chained behind that IR move.
3. ``breakout`` on a player not on the roster, with a rostered ``drop_player_id``: claim him
   and drop that player.

Everything else is ignored with a reason. Keys come from the key builders (Job name
``rumor-action``), so re-running the same signals in a week gives duplicates, not new moves.

Every move is validated before the first one is saved, the Sleeper-id check of all their ESPN
ids included (one query), and the moves are saved in one transaction (``TriggerGroup``) and
published only after it committed: a refusal (422, naming the signal's field) or a lost
database saves and sends none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from config.settings import KickoffSettings
from models.audit import AuditContext
from models.boundary import transaction
from publisher import validation as v
from publisher.amqp import AmqpPublisher
from publisher.errors import TriggerValidationError
from publisher.idempotency import lineup_key, waiver_key
from publisher.sleeper_ids import sleeper_id_refusal, sleeper_only_ids
from publisher.trace import check_traceparent
from publisher.trigger_saves import TriggerGroup
from publisher.triggers import LineupRequest, TriggerResult, WaiverRequest, trigger_lineup, trigger_waiver

RUMOR_JOB_NAME = "rumor-action"
RUMOR_MIN_CONFIDENCE = 0.7
BENCH_SLOTS = frozenset({"BE", "IR"})
SIGNAL_KINDS = frozenset({"ruled_out", "season_ending", "breakout"})


@dataclass(frozen=True)
class RumorSignal:
    """One rumor about an ESPN player, with the source's confidence (0..1)."""

    player_id: int
    kind: str
    confidence: float
    source: str = ""
    replacement_player_id: int | None = None
    drop_player_id: int | None = None


@dataclass(frozen=True)
class RumorRequest:
    """POST /v1/trigger/rumor-action: the team's roster (ESPN id -> slot) and the signals to weigh."""

    league_id: str
    team: str
    season: int
    week: int
    roster: dict[int, str]
    signals: list[RumorSignal] = field(default_factory=list)
    traceparent: str | None = None
    created_by_key_id: str | None = None  # the API key asking (recorded on each move's action)


@dataclass(frozen=True)
class RumorOutcome:
    """What one signal led to: the triggers it sent, or why it was ignored."""

    signal: RumorSignal
    rule: str | None
    results: tuple[TriggerResult, ...] = ()
    ignored: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "player_id": self.signal.player_id,
            "kind": self.signal.kind,
            "rule": self.rule,
            "results": [r.as_json() for r in self.results],
            "ignored": self.ignored,
        }


def _check(request: RumorRequest) -> None:
    """Every check of the request and its signals that needs no database, before any move is sent."""
    v.text(request.league_id, "league_id")
    v.text(request.team, "team")
    v.positive_int(request.season, "season")
    v.positive_int(request.week, "week")
    check_traceparent(request.traceparent)
    for pid in request.roster:
        v.espn_id(pid, "roster")
    for i, s in enumerate(request.signals):
        v.espn_id(s.player_id, f"signals[{i}].player_id")
        for name in ("replacement_player_id", "drop_player_id"):
            if getattr(s, name) is not None:
                v.espn_id(getattr(s, name), f"signals[{i}].{name}")
        if s.kind not in SIGNAL_KINDS:
            raise TriggerValidationError(f"signals[{i}].kind", f"must be one of {sorted(SIGNAL_KINDS)}")
        if isinstance(s.confidence, bool) or not isinstance(s.confidence, int | float):
            raise TriggerValidationError(f"signals[{i}].confidence", "must be a number between 0 and 1")
        if not 0 <= s.confidence <= 1:
            raise TriggerValidationError(f"signals[{i}].confidence", "must be between 0 and 1")


def _move_ids(request: RumorRequest) -> dict[str, int]:
    """Field -> ESPN id of every id a move would carry (the players the rules act on)."""
    ids: dict[str, int] = {}
    for i, s in enumerate(request.signals):
        rule = _rule(s, request.roster)
        if isinstance(rule, str):
            ids[f"signals[{i}].player_id"] = s.player_id
            if rule == "ir-and-claim-replacement" and s.replacement_player_id is not None:
                ids[f"signals[{i}].replacement_player_id"] = s.replacement_player_id
            if rule == "claim-breakout" and s.drop_player_id is not None:
                ids[f"signals[{i}].drop_player_id"] = s.drop_player_id
    return ids


def _refuse_sleeper_ids(request: RumorRequest) -> None:
    """Refuse the request (naming the signal's field) when any move would carry a Sleeper id; one query."""
    ids = _move_ids(request)
    refusal = sleeper_id_refusal(dict(ids), sleeper_only_ids(ids.values())) if ids else None
    if refusal is not None:
        raise refusal


def _rule(s: RumorSignal, roster: dict[int, str]) -> str | tuple[None, str]:
    """The rule ``s`` applies, or (None, why it is ignored)."""
    slot = roster.get(s.player_id)
    if s.confidence < RUMOR_MIN_CONFIDENCE:
        return None, f"confidence {s.confidence} below {RUMOR_MIN_CONFIDENCE}"
    if s.kind == "ruled_out":
        if slot is None or slot in BENCH_SLOTS:
            return None, "not a rostered starter"
        return "bench-ruled-out-starter"
    if s.kind == "season_ending":
        if slot is None or slot == "IR" or s.replacement_player_id is None:
            return None, "not rostered, already on IR, or no replacement"
        return "ir-and-claim-replacement"
    if slot is not None or s.drop_player_id is None or s.drop_player_id not in roster:  # breakout
        return None, "already rostered or no rostered drop_player_id"
    return "claim-breakout"


def evaluate_rumors(
    request: RumorRequest,
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    run_id: str | None = None,
    audit: AuditContext | None = None,
) -> list[RumorOutcome]:
    """Apply the rules to each signal and send the resulting moves; one outcome per signal.

    Every move is checked first (see the module docstring): a refusal sends and saves nothing. With
    ``audit``, the request is audited (trigger.rumor_action, its league the target) before anything
    else, and its triggers are not audited one by one.
    """
    if audit is not None:
        after = {"team_id": request.team, "signals": len(request.signals)}
        audit.record("trigger.rumor_action", "league", request.league_id, after=after)
    _check(request)
    _refuse_sleeper_ids(request)
    inputs = {"season": request.season, "week": request.week}
    common = {
        "league_id": request.league_id,
        "team_id": request.team,
        "traceparent": request.traceparent,
        "decision_inputs": inputs,
    }
    group = TriggerGroup(settings=settings)
    kw = {
        "publisher": publisher,
        "settings": settings,
        "run_id": run_id,
        "committer": group,
        "created_by_key_id": request.created_by_key_id,
    }

    def lineup(swaps: list[dict[str, Any]]) -> TriggerResult:
        key = lineup_key(
            job_name=RUMOR_JOB_NAME, team=request.team, season=request.season, week=request.week, swaps=swaps
        )
        return trigger_lineup(LineupRequest.unchecked(swaps=swaps, idempotency_key=key, **common), **kw)

    def claim(add: int, drop: int | None, after: str | None = None, ir: int | None = None) -> TriggerResult:
        key = waiver_key(
            team=request.team,
            season=request.season,
            week=request.week,
            add_player_id=add,
            drop_player_id=drop,
            ir_player_id=ir,
        )
        req = WaiverRequest.unchecked(
            add_player_id=add, drop_player_id=drop, after_tracking_id=after, idempotency_key=key, **common
        )
        return trigger_waiver(req, **kw)

    outcomes: list[RumorOutcome] = []
    with transaction():  # every move saved, or none (a refusal rolls back)
        for i, s in enumerate(request.signals):
            try:
                outcomes.append(_apply(s, request.roster, lineup, claim))
            except TriggerValidationError as exc:  # e.g. the IR move a claim would chain to failed
                raise TriggerValidationError(f"signals[{i}].{exc.field}", exc.reason) from exc
    sent = group.publish(publisher=publisher)  # after the commit: the moves' messages at once
    return [
        replace(o, results=tuple(sent.get(r.tracking_id, r) for r in o.results)) if o.results else o
        for o in outcomes
    ]


def _apply(
    s: RumorSignal,
    roster: dict[int, str],
    lineup: Callable[[list[dict[str, Any]]], TriggerResult],
    claim: Callable[..., TriggerResult],
) -> RumorOutcome:
    """Send the moves of one signal's rule through ``lineup`` and ``claim``; its outcome."""
    rule = _rule(s, roster)
    if not isinstance(rule, str):
        return RumorOutcome(s, None, ignored=rule[1])
    if rule == "bench-ruled-out-starter":
        swaps = [{"player_id": s.player_id, "to_slot": "BE", "kind": "lineup"}]
        return RumorOutcome(s, rule, (lineup(swaps),))
    if rule == "ir-and-claim-replacement":
        assert s.replacement_player_id is not None
        ir = lineup([{"player_id": s.player_id, "to_slot": "IR", "kind": "ir"}])
        chained = claim(s.replacement_player_id, None, after=ir.tracking_id, ir=s.player_id)
        return RumorOutcome(s, rule, (ir, chained))
    return RumorOutcome(s, rule, (claim(s.player_id, s.drop_player_id),))  # claim-breakout


def signals_from_json(items: Iterable[dict[str, Any]]) -> list[RumorSignal]:
    """Build signals from JSON objects (CLI, API)."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(RumorSignal(**item))
        except TypeError as exc:
            raise TriggerValidationError(f"signals[{i}]", str(exc)) from exc
    return out
