"""Request bodies of the API: the message contract's field names; unknown fields are refused (422).

Types here are only the JSON shapes; the library functions validate the values (ESPN ids,
traceparents, keys) and name the field, so nothing is checked twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from publisher.queues import TRADE_QUEUES
from publisher.trade_reconcile import Resolution
from runs.dedupe import DEBOUNCE_MAX_SECONDS, EVENT_KEY_MAX_LENGTH

#: The trade queues and the reconcile choices, as the publisher names them.
TradeQueue = Literal[TRADE_QUEUES]  # type: ignore[valid-type]
ResolutionChoice = Literal[tuple(r.value for r in Resolution)]  # type: ignore[misc]


class Body(BaseModel):
    """A request body: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class Swap(Body):
    player_id: int | str = Field(description="ESPN player id (an integer).")
    to_slot: str
    kind: str | None = Field(None, description="`ir` marks an IR move a waiver claim can chain behind.")


class TriggerBody(Body):
    league_id: str
    team_id: str
    idempotency_key: str | None = None
    decision_inputs: dict[str, Any] = Field(default_factory=dict)
    traceparent: str | None = Field(None, description="W3C traceparent (default: the request header).")


class LineupBody(TriggerBody):
    swaps: list[Swap]


class WaiverBody(TriggerBody):
    add_player_id: int | str
    drop_player_id: int | str | None = None
    bid: int | None = None
    after_tracking_id: str | None = None


class DraftPickBody(TriggerBody):
    pick_number: int
    espn_id: int | str
    expires_at: datetime | None = Field(None, description="ISO 8601 with an offset.")


class RumorBody(Body):
    league_id: str
    team_id: str
    season: int
    week: int
    roster: dict[str, str] = Field(default_factory=dict, description="ESPN id -> slot.")
    signals: list[dict[str, Any]] = Field(default_factory=list)
    traceparent: str | None = None


class OfferApproveBody(Body):
    league_id: str
    team_id: str
    counterparty_team_id: str
    give_player_ids: list[int | str]
    receive_player_ids: list[int | str]
    traceparent: str | None = None


class DecisionBody(Body):
    league_id: str
    team_id: str
    decision: str = Field(description="accept | reject")
    decision_key: str | None = Field(None, description="Claim key (default: the trade id).")
    traceparent: str | None = None


class DecisionRetryBody(Body):
    decision_key: str | None = Field(None, description="Claim key (default: the trade id).")


class CounterBody(Body):
    league_id: str
    team_id: str
    publication_key: str
    give_player_ids: list[int | str] = Field(description="Sleeper player ids.")
    receive_player_ids: list[int | str] = Field(description="Sleeper player ids.")
    traceparent: str | None = None


class ReconcileBody(Body):
    queue: TradeQueue
    claim_key: str = Field(
        min_length=1, max_length=500, description="The claim's offer, decision or publication key."
    )
    resolution: ResolutionChoice = Field(
        description="published: the worker got it (nothing is sent); republish: send it again now with the "
        "same message id; cancel: never send it (its key stays claimed)."
    )


class ActionResultBody(Body):
    outcome: str = Field(description="succeeded | failed")
    details: dict[str, Any] = Field(default_factory=dict, description="e.g. team_id, error.")
    reported_by: str | None = Field(None, description="The consumer's name.")


class RunBody(Body):
    job: str
    params: dict[str, Any] = Field(default_factory=dict)
    trigger: Literal["manual", "event"] = Field(
        "manual",
        description="`manual`: a fresh dedupe key (the run id); `event`: one run per key and window.",
    )
    event_key: str | None = Field(
        None,
        min_length=1,
        max_length=EVENT_KEY_MAX_LENGTH,
        description="With trigger `event`: the event's key (required).",
    )
    debounce_seconds: float | None = Field(
        None,
        gt=0,
        le=DEBOUNCE_MAX_SECONDS,
        strict=True,
        description="With trigger `event`: the window's length (default: the job's debounce_seconds,"
        " else 60); windows are aligned to the epoch.",
    )


class StartListenerBody(Body):
    force: bool = False
    overrides: dict[str, Any] = Field(default_factory=dict)


class AutoDispatchBody(Body):
    on: bool


class DispatchBody(Body):
    within_minutes: int = Field(0, ge=0)
    is_test: bool | None = None


class SweepBody(Body):
    heartbeat_stale_seconds: float | None = Field(None, ge=0)
