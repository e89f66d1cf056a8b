"""Request bodies of the API: the message contract's field names, strict types and every bound.

Every body derives from ``Body``: unknown fields are refused and types are strict (``false`` is
no number and ``0`` no boolean), so what the OpenAPI document says is what a route accepts.
Each constraint the library functions enforce (non-empty ids, ESPN ids, traceparents, enums,
bounds) is stated here as a type below, so it is in the schema too; the library still checks
the values it is given (the CLI calls it directly) and names the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
    model_validator,
)

from config.settings import KickoffSettings, MatchListenerEnvironment
from lifecycle.board import BoardEntry
from lifecycle.bulk import ACTIONS as BULK_ACTIONS
from lifecycle.bulk import BADGES as BULK_BADGES
from lifecycle.bulk import STATUSES as BULK_STATUSES
from lifecycle.listener_run import RUN_NUMBER_BOUNDS, RUN_SETTINGS
from publisher.queues import TRADE_QUEUES
from publisher.trade_reconcile import Resolution
from publisher.trigger_requests import (  # noqa: F401 (the shared types, also for the other bodies)
    INTEGRAL,
    MAX_ID_LENGTH,
    MAX_INT,
    MAX_ITEMS,
    MAX_TEXT_LENGTH,
    NO_NUL,
    NON_BLANK,
    TRACEPARENT,
    UUID_PATTERN,
    Body,
    BoundedFloat,
    BoundedInt,
    DecisionInputs,
    EspnId,
    Id,
    JsonKey,
    JsonObject,
    JsonValue,
    PositiveInt,
    Swap,
    Text,
    Time,
    Traceparent,
    TrackingId,
    aware_time,
)
from runs.dedupe import DEBOUNCE_MAX_SECONDS, DEBOUNCE_MIN_SECONDS, EVENT_KEY_MAX_LENGTH

#: Why an operator acts (kept in the audit log): non-blank text.
Reason = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_LENGTH, pattern=NON_BLANK)]
#: An id in a path or a query (a match's internal id or sr_id, a run id, a key).
PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=NON_BLANK)]
QueryId = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=NON_BLANK)]
SleeperId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=NON_BLANK),
    Field(description="A Sleeper player id (a string; team defenses are team codes)."),
]


#: The trade queues and the reconcile choices, as the publisher names them.
TradeQueue = Literal[TRADE_QUEUES]  # type: ignore[valid-type]
ResolutionChoice = Literal[tuple(r.value for r in Resolution)]  # type: ignore[misc]


class RumorSignalBody(Body):
    """One rumor about an ESPN player, with the source's confidence (0..1)."""

    player_id: EspnId
    kind: Literal["ruled_out", "season_ending", "breakout"]
    confidence: Annotated[float, Field(ge=0, le=1)]
    source: Text = ""
    replacement_player_id: EspnId | None = None
    drop_player_id: EspnId | None = None


class RumorBody(Body):
    league_id: Id
    team_id: Id
    season: PositiveInt
    week: PositiveInt
    roster: Annotated[
        dict[Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,17}$")], Text],
        Field(
            max_length=MAX_ITEMS,
            description="ESPN id -> slot.",
            json_schema_extra={"additionalProperties": False},
        ),
    ] = Field(default_factory=dict)
    signals: list[RumorSignalBody] = Field(default_factory=list, max_length=MAX_ITEMS)
    traceparent: Traceparent | None = None


class OfferApproveBody(Body):
    league_id: Id
    team_id: Id
    counterparty_team_id: Id
    give_player_ids: list[EspnId] = Field(min_length=1, max_length=MAX_ITEMS)
    receive_player_ids: list[EspnId] = Field(min_length=1, max_length=MAX_ITEMS)
    traceparent: Traceparent | None = None


class DecisionBody(Body):
    league_id: Id
    team_id: Id
    decision: Literal["accept", "reject"]
    decision_key: Id | None = Field(None, description="Claim key (default: the trade id).")
    traceparent: Traceparent | None = None


class DecisionRetryBody(Body):
    decision_key: Id | None = Field(None, description="Claim key (default: the trade id).")
    league_id: Id | None = Field(
        None,
        description="The league whose decision it is (a key is claimed once per league); needed only when"
        " more than one league the key may act on claimed it.",
    )


class CounterBody(Body):
    league_id: Id
    team_id: Id
    publication_key: Id
    give_player_ids: list[SleeperId] = Field(min_length=1, max_length=MAX_ITEMS)
    receive_player_ids: list[SleeperId] = Field(min_length=1, max_length=MAX_ITEMS)
    traceparent: Traceparent | None = None


class ReconcileBody(Body):
    queue: TradeQueue
    claim_key: Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=NON_BLANK)] = Field(
        description="The claim's offer, decision or publication key."
    )
    resolution: ResolutionChoice = Field(
        description="published: the worker got it (nothing is sent); republish: send it again now with the "
        "same message id; cancel: never send it (its key stays claimed)."
    )
    reason: Reason | None = Field(None, description="Why (optional; kept in the audit log).")
    league_id: Id | None = Field(
        None,
        description="The claim's league (a key is claimed once per league); needed only when more than one"
        " league claimed the key.",
    )


class ApiKeyBody(Body):
    """A new API key: who uses it, what it may call, and optionally the leagues it is limited to."""

    name: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[^@\x00]*[^\s@\x00][^@\x00]*$"),
    ] = Field(
        description="Who or what uses the key (shown by the list): unique in any case, no `@` (the CLI's"
        " `user@host` form)."
    )
    scope: Literal["read", "trigger", "operator", "admin"] = Field(
        description="read < trigger, read < operator < admin (only admin manages keys)."
    )
    leagues: list[Id] | None = Field(
        None,
        min_length=1,
        max_length=MAX_ITEMS,
        description="Limit the key to these leagues (a trigger's league_id, a match's league name);"
        " absent: every league.",
    )
    reason: Reason | None = Field(None, description="Why (optional; kept in the audit log).")


class ActionResultBody(Body):
    outcome: Literal["succeeded", "failed"]
    details: JsonObject = Field(default_factory=dict, description="e.g. team_id, error.")
    reported_by: Text | None = Field(None, description="The consumer's name.")


EventKey = Annotated[str, StringConstraints(max_length=EVENT_KEY_MAX_LENGTH, pattern=NON_BLANK)]


class RunBody(Body):
    job: Id = Field(description="A job of the catalog (GET /v1/runs lists runs; `kickoff runs jobs`).")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Checked against the job's params schema (the catalog's)."
    )
    trigger: Literal["manual", "event"] = Field(
        "manual",
        description="`manual`: a fresh dedupe key (the run id); `event`: one run per key and window.",
    )
    event_key: (
        Annotated[str, StringConstraints(max_length=EVENT_KEY_MAX_LENGTH, pattern=NON_BLANK)] | None
    ) = Field(None, description="With trigger `event`: the event's key (required).")
    debounce_seconds: float | None = Field(
        None,
        ge=DEBOUNCE_MIN_SECONDS,
        le=DEBOUNCE_MAX_SECONDS,
        strict=True,
        description="With trigger `event`: the window's length (default: the job's debounce_seconds,"
        " else 60); windows are aligned to the epoch.",
    )


#: Bounds of a per-run setting's number (the lower one where its setting has none of its own): the
#: library's, which the CLI and the console check too.
_RUN_BOUNDS: dict[type, float] = RUN_NUMBER_BOUNDS


def _run_setting(name: str) -> tuple[Any, Any]:
    """One per-run setting as a body field: its setting's type, bounded, never required."""
    # Read from the class that declares it: KickoffSettings holds the run settings every process shares
    # (the play-by-play timeouts), MatchListenerEnvironment those only a listener reads.
    holder = KickoffSettings if name in KickoffSettings.model_fields else MatchListenerEnvironment
    info = holder.model_fields[name]
    annotation = info.annotation
    args = getattr(annotation, "__args__", (annotation,))
    base = next((a for a in args if a is not type(None)), annotation)
    extra: list[Any] = list(info.metadata)
    if base in _RUN_BOUNDS:
        bound = _RUN_BOUNDS[base]
        has_lower = any(hasattr(m, "ge") or hasattr(m, "gt") for m in info.metadata)
        extra.append(Field(le=bound) if has_lower else Field(ge=-bound, le=bound))
    if base is int:
        extra.append(INTEGRAL)
    typed = Annotated[base, *extra] if extra else base
    if type(None) in args:
        typed = typed | None
    return typed, Field(None, description=info.description)


#: The per-run settings a start may override (RUN_SETTINGS), each with its setting's type.
ListenerOverrides = create_model(
    "ListenerOverrides",
    __base__=Body,
    __doc__="Per-run listener settings: only the listener behaviour settings of docs/lifecycle.md.",
    **{name: _run_setting(name) for name in sorted(RUN_SETTINGS)},
)


_OPTIONAL_REASON = "Why (optional; kept in the audit log)."


class StartListenerBody(Body):
    """A manual start; a forced one (``force`` true) needs a ``reason``."""

    model_config = ConfigDict(
        json_schema_extra={
            # force absent or false, or a reason that is a string (``"reason": null`` is no reason)
            "anyOf": [
                {"properties": {"force": {"const": False}}},
                {"required": ["reason"], "properties": {"reason": {"type": "string"}}},
            ],
        }
    )

    force: bool = False
    reason: Reason | None = Field(None, description="Why (required with force; kept in the audit log).")
    overrides: ListenerOverrides = Field(default_factory=ListenerOverrides)  # type: ignore[valid-type]

    def override_values(self) -> dict[str, Any]:
        """The overrides the caller set (an unset one is not an override)."""
        return self.overrides.model_dump(exclude_unset=True)

    @model_validator(mode="after")
    def _forced_needs_reason(self) -> StartListenerBody:
        if self.force and self.reason is None:
            raise ValueError("a forced start needs a reason (it goes into the audit log)")
        return self


class StopListenerBody(Body):
    reason: Reason = Field(description="Why (required; kept in the audit log).")


class AutoDispatchBody(Body):
    on: bool
    reason: Reason | None = Field(None, description=_OPTIONAL_REASON)


class DispatchBody(Body):
    within_minutes: Annotated[int, Field(ge=0, le=7 * 24 * 60), INTEGRAL] = 0
    is_test: bool | None = None
    reason: Reason | None = Field(None, description=_OPTIONAL_REASON)


class SweepBody(Body):
    heartbeat_stale_seconds: Annotated[float, Field(ge=0, le=366 * 86400)] | None = None
    reason: Reason | None = Field(None, description=_OPTIONAL_REASON)


class ArchiveVerificationAnswer(BaseModel):
    """A match's archive compared with the provider's play-by-play (as `kickoff matches verify-archive
    --json`); the outcome is also stored on the match."""

    ok: bool = Field(description="True when nothing is missing, extra or differing.")
    missing: list[str] = Field(description="Event ids the play-by-play lists and the archive lacks.")
    extra: list[str] = Field(
        description="Event ids the archive holds (current state) and the play-by-play does not."
    )
    differing: list[str] = Field(description="Event ids held in another version than the play-by-play's.")
    events: int = Field(description="Events the play-by-play lists.")


class ListenerBoardAnswer(BaseModel):
    """The listener board (as `kickoff listeners status --json`): one entry per match, its newest run's
    badge, gaps and archive verification, and ``degraded`` while the open run's event log writing is
    behind (lifecycle.board ``BoardEntry``, the one declaration of an entry's fields)."""

    at: str = Field(description="When the board was read (UTC, ISO 8601 to the second).")
    count: int = Field(description="Entries in matches.")
    matches: list[BoardEntry] = Field(description="The entries, by league and sr_id.")


#: A bulk action's confirm token (lifecycle.bulk: ``secrets.token_urlsafe(32)``).
ConfirmToken = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{20,100}$")]
BulkAction = Literal[BULK_ACTIONS]  # type: ignore[valid-type]
BulkBadge = Literal[BULK_BADGES]  # type: ignore[valid-type]
MatchStatus = Literal[BULK_STATUSES]  # type: ignore[valid-type]


class BulkFilterBody(Body):
    """Which matches: every field that is set must fit; a league or match ids is required."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["league"], "properties": {"league": {"type": "string"}}},
                {"required": ["match_ids"], "properties": {"match_ids": {"type": "array"}}},
            ]
        }
    )

    league: Id | None = Field(None, description="A league's name (case-insensitive).")
    status: MatchStatus | None = Field(None, description="The match status (Match.status).")
    badge: BulkBadge | None = Field(None, description="The board's badge of the newest run (`-`: no run).")
    match_ids: list[Id] | None = Field(
        None, min_length=1, max_length=MAX_ITEMS, description="Internal ids or sr_ids (each must exist)."
    )

    @model_validator(mode="after")
    def _league_or_ids(self) -> BulkFilterBody:
        if self.league is None and self.match_ids is None:
            raise ValueError("a bulk filter needs a league or match ids")
        return self


class BulkBody(Body):
    """A bulk action: ``dry_run`` true previews (nothing changes); ``confirm`` (the preview's) acts."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["dry_run"],
                    "properties": {"dry_run": {"const": True}, "confirm": {"type": "null"}},
                },
                {
                    "required": ["confirm"],
                    "properties": {"dry_run": {"const": False}, "confirm": {"type": "string"}},
                },
            ]
        }
    )

    action: BulkAction
    filter: BulkFilterBody
    reason: Reason = Field(description="Why (required; kept in the audit log with every per-match act).")
    dry_run: bool = Field(
        False, description="Preview only: answer the matches and a confirm, change nothing."
    )
    confirm: ConfirmToken | None = Field(
        None,
        description="The confirm of a preview of the same action and filter by the same key (valid"
        " 300 s, used once): act on exactly the previewed matches.",
    )

    @model_validator(mode="after")
    def _preview_or_confirm(self) -> BulkBody:
        if self.dry_run and self.confirm is not None:
            raise ValueError("dry_run and confirm exclude each other: preview, then confirm")
        if not self.dry_run and self.confirm is None:
            raise ValueError("a bulk action needs dry_run true (the preview) or the preview's confirm")
        return self


class BulkMatchAnswer(BaseModel):
    match_id: str
    sr_id: str
    league: str
    status: str
    badge: str
    title: str | None = Field(
        description='The match\'s title ("HOU @ KC"; null when the schedule gave none).'
    )


class BulkFilterAnswer(BaseModel):
    league: str | None
    status: str | None
    badge: str | None
    match_ids: list[str]


class BulkPreviewAnswer(BaseModel):
    """A preview: nothing was changed; ``confirm`` (null when nothing matched) lets the same call act."""

    action: str
    filter: BulkFilterAnswer = Field(description="The filter as the confirm binds it.")
    count: int
    match_ids: list[str] = Field(description="The matches a confirmed call acts on, by league and sr_id.")
    matches: list[BulkMatchAnswer]
    confirm: str | None
    expires_at: str | None = Field(description="When the confirm expires (ISO 8601, UTC).")


class BulkResultAnswer(BaseModel):
    match_id: str
    ok: bool
    detail: str = Field(description="What was done, or why not (e.g. the match no longer exists).")
    title: str | None = Field(
        description='The match\'s title and league ("HOU @ KC (mlb)"); null when the match no longer exists.'
    )


class BulkOutcomeAnswer(BaseModel):
    """A confirmed bulk action: one result per previewed match."""

    action: str
    count: int
    failed: int
    results: list[BulkResultAnswer]
