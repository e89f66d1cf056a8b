"""The trigger queues, one declaration each: everything kickoff derives a trigger queue's parts from.

A ``TriggerQueue`` names the RabbitMQ queue and its request model (``publisher.trigger_requests``:
one pydantic model for the library, the API and the CLI), the idempotency key recipe and the
inputs it needs beyond the request, the key's release TTL (a setting), the ``kickoff trigger``
command and its help (the command is also the route under ``/v1/trigger``), the key scope the
route needs and the AsyncAPI channel and message that describe what is published. From the
declarations come ``publisher.queues``' lists, the key release TTL, the API's trigger routes and
their scope, the CLI commands and options, the HTTP client's paths and the contract check
(``publisher.contract.check_trigger_queue``). docs/adding-a-trigger-queue.md walks through adding one.

``publisher.triggers.send`` sends a queue's request: with the save builder its declaration names
(``save``) if it has rules of its own, else the request's own fields are the message; a queue
declared ``must_deliver`` answers only once its message is delivered (else 503, retry with the key).
The builder is named ``"module:function"`` and imported when first used: the builders need the
database and the publisher, which import this module.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from config.settings import KickoffSettings
from publisher.idempotency import draft_key, lineup_key, waiver_key
from publisher.trigger_requests import DraftPickRequest, LineupRequest, TriggerRequest, WaiverRequest

#: The one path prefix of the trigger routes.
ROUTE_PREFIX = "/v1/trigger"
#: The needs a trigger route may declare (api.auth.Need's keyed ones).
SCOPES = ("read", "trigger", "operator", "admin")
#: What a command may be: it is both `kickoff trigger COMMAND` and the route's last path segment.
COMMAND_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
#: How a declaration names its save builder: ``"module:function"``, e.g. ``publisher.triggers:waiver_save``.
SAVE_BUILDER_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class KeyInput:
    """An input of the key recipe that is not a request field (``kickoff trigger``'s option ``flag``).

    ``decision_input`` ones (season, week) also go into the request's decision_inputs.
    """

    name: str
    flag: str
    help: str
    type: type = int
    default: Any = None
    decision_input: bool = False


#: The recipe: the key of a request, given the key inputs (None: send no key).
KeyRecipe = Callable[[TriggerRequest, Mapping[str, Any]], str | None]


def no_key(_request: TriggerRequest, _inputs: Mapping[str, Any]) -> str | None:
    """The recipe of a queue without one: no key unless the caller gives it."""
    return None


@dataclass(frozen=True, kw_only=True)
class TriggerQueue:
    """One trigger queue, declared once (module docstring)."""

    name: str  # the RabbitMQ queue (the outbox publishes to it)
    request: type[TriggerRequest]  # the request model (library, API body, CLI options)
    command: str  # `kickoff trigger COMMAND` and the route `POST ROUTE_PREFIX/COMMAND`
    summary: str  # one line: the route's description and the command's first help line
    help: str = ""  # more of the command's --help
    route_help: str = ""  # more of the route's description (OpenAPI)
    key: KeyRecipe = no_key  # the idempotency key recipe (the CLI's default key)
    key_inputs: tuple[KeyInput, ...] = ()  # what the recipe needs beyond the request
    ttl: str | timedelta  # how long a finished action keeps its key: a setting's name (seconds) or fixed
    scope: str = "trigger"  # the need of its route (api.auth.Need): which keys may call it
    channel: str  # the AsyncAPI channel id (docs/asyncapi.yaml)
    message: str  # the AsyncAPI message name the channel carries for this trigger
    error_statuses: tuple[int, ...] = (409,)  # statuses of its own, besides the common ones (OpenAPI)
    operation: str = ""  # the route's OpenAPI name (default: the command with underscores)
    save: str | None = None  # "module:function" of its save builder (rules of its own); None: its fields
    must_deliver: bool = False  # answer only once delivered: else 503 (retry with the key) or 409 (dead)

    def __post_init__(self) -> None:
        if not (isinstance(self.request, type) and issubclass(self.request, TriggerRequest)):
            raise TypeError(f"trigger queue {self.name}: request must be a TriggerRequest model")
        if not COMMAND_PATTERN.fullmatch(self.command):
            raise ValueError(
                f"trigger queue {self.name}: command {self.command!r} is not a lowercase word "
                "(letters, digits, dashes): it is also the route"
            )
        if self.scope not in SCOPES:
            raise ValueError(f"trigger queue {self.name}: scope {self.scope!r} is not one of {SCOPES}")
        if self.save is not None and not SAVE_BUILDER_PATTERN.fullmatch(self.save):
            raise ValueError(f"trigger queue {self.name}: save {self.save!r} is not 'module:function'")

    @property
    def route(self) -> str:
        """The route's path under ROUTE_PREFIX: the command, e.g. ``/draft-pick``."""
        return f"/{self.command}"

    @property
    def path(self) -> str:
        """The route's full path."""
        return ROUTE_PREFIX + self.route

    @property
    def operation_name(self) -> str:
        """The route's OpenAPI name (its operationId's start)."""
        return self.operation or self.command.replace("-", "_")

    @property
    def description(self) -> str:
        """The route's description: the summary and the route's own help."""
        return f"{self.summary} {self.route_help}".strip()

    def save_builder(self) -> Callable[..., Any] | None:
        """The save builder the declaration names, imported now (None: the request's own fields)."""
        if self.save is None:
            return None
        module, _, function = self.save.partition(":")
        return getattr(importlib.import_module(module), function)

    def release_ttl(self, settings: KickoffSettings) -> timedelta:
        """How long a finished action of this queue keeps its key."""
        if isinstance(self.ttl, timedelta):
            return self.ttl
        return timedelta(seconds=getattr(settings, self.ttl))


def _season_week(inputs: Mapping[str, Any]) -> tuple[Any, Any]:
    return inputs.get("season"), inputs.get("week")


def _lineup_key(request: TriggerRequest, inputs: Mapping[str, Any]) -> str | None:
    season, week = _season_week(inputs)
    return lineup_key(
        job_name=inputs["job_name"],
        team=request.team_id,
        season=season,
        week=week,
        swaps=request.value("swaps"),
    )


def _waiver_key(request: TriggerRequest, inputs: Mapping[str, Any]) -> str | None:
    add, drop = request.value("add_player_id"), request.value("drop_player_id")
    if not isinstance(add, int):
        return None  # the trigger refuses it, naming the field
    season, week = _season_week(inputs)
    return waiver_key(
        team=request.team_id,
        season=season,
        week=week,
        add_player_id=add,
        drop_player_id=drop,
        ir_player_id=inputs.get("ir_player_id"),
    )


def _draft_key(request: TriggerRequest, _inputs: Mapping[str, Any]) -> str | None:
    espn = request.value("espn_id")
    if not isinstance(espn, int):
        return None
    return draft_key(league_id=request.league_id, pick_number=request.value("pick_number"), espn_id=espn)


#: The season and week of the lineup and waiver keys: part of the key and, as decision_inputs, of
#: its ``:s<season>w<week>`` suffix (``idempotency.effective_key``); without both no key is sent.
SEASON_WEEK = (
    KeyInput(
        "season",
        "--season",
        "Season (part of the key and its suffix; no key is sent without season and week).",
        decision_input=True,
    ),
    KeyInput("week", "--week", "Week (part of the key and its suffix).", decision_input=True),
)


def _job_name() -> str:
    """The CronJob's Job name (downward API), else ``cli``."""
    return os.environ.get("JOB_NAME", "cli")


LINEUP = TriggerQueue(
    name="lineup_updates",
    request=LineupRequest,
    command="lineup",
    summary="Queue a lineup change (lineup_updates).",
    help="A swap ending in `:ir` is an IR move a waiver claim can chain behind.",
    key=_lineup_key,
    key_inputs=(
        KeyInput(
            "season",
            "--season",
            "Season (part of the key and its suffix; without season and week the key hashes the"
            " Job name, team and swaps only).",
            decision_input=True,
        ),
        SEASON_WEEK[1],
        KeyInput("job_name", "--job-name", "Job name in the key.", type=str, default=_job_name),
    ),
    ttl="idempotency_ttl_lineup_seconds",
    channel="lineupUpdates",
    message="LineupUpdate",
    save="publisher.triggers:lineup_save",
)

WAIVER = TriggerQueue(
    name="waiver_actions",
    request=WaiverRequest,
    command="waiver",
    summary="Queue a waiver claim (waiver_actions), optionally chained behind an IR move.",
    help="With --after it waits for that IR move (and must not --drop).",
    key=_waiver_key,
    key_inputs=(
        KeyInput("ir_player_id", "--ir-player", "ESPN id moved to IR (part of the key)."),
        *SEASON_WEEK,
    ),
    ttl="idempotency_ttl_waiver_seconds",
    channel="waiverActions",
    message="WaiverClaim",
    error_statuses=(404, 409),
    save="publisher.triggers:waiver_save",
)

DRAFT_PICK = TriggerQueue(
    name="draft_targets",
    request=DraftPickRequest,
    command="draft-pick",
    summary="Queue a draft target (draft_targets) that expires with its pick.",
    route_help="409 for a filled or expired pick or a dead target, 503 if not delivered (retry with the "
    "same key).",
    help="Without --expires-at it expires after DRAFT_TARGET_DEFAULT_EXPIRY_SECONDS.\n\n"
    "Answers `queued` once RabbitMQ confirmed it. A filled or expired pick is a conflict (exit "
    "4); a target that could not be delivered is `unavailable` (exit 5, the tracking id is "
    "printed): retry with the same key and it is published again at once. A target whose "
    "message is dead (refused to the last attempt) is a conflict (exit 4): revive it with "
    "`kickoff outbox retry-dead ROW_ID` or send a new key.",
    key=_draft_key,
    ttl="idempotency_ttl_draft_seconds",
    channel="draftTargets",
    message="DraftTarget",
    save="publisher.triggers:draft_pick_save",
    must_deliver=True,
)

_REGISTRY: dict[str, TriggerQueue] = {q.name: q for q in (LINEUP, WAIVER, DRAFT_PICK)}


def trigger_queues() -> tuple[TriggerQueue, ...]:
    """Every trigger queue, in declaration order."""
    return tuple(_REGISTRY.values())


def trigger_queue(name: str) -> TriggerQueue:
    """The declaration of queue ``name`` (KeyError: not a trigger queue)."""
    return _REGISTRY[name]


def queue_of_request(request: type[TriggerRequest]) -> TriggerQueue:
    """The declaration whose request model is ``request`` (KeyError: none)."""
    for queue in _REGISTRY.values():
        if queue.request is request:
            return queue
    raise KeyError(request.__name__)


@contextmanager
def registered(queue: TriggerQueue) -> Iterator[TriggerQueue]:
    """Declare ``queue`` in this process for the ``with`` block (tests: a throwaway extra queue).

    What reads the declarations when it is built sees it: an application created, or a
    ``kickoff trigger`` command looked up, inside the block.
    """
    if queue.name in _REGISTRY:
        raise ValueError(f"trigger queue {queue.name} is declared already")
    _REGISTRY[queue.name] = queue
    try:
        yield queue
    finally:
        del _REGISTRY[queue.name]


def release_ttl(queue: str, settings: KickoffSettings) -> timedelta:
    """How long a finished action of trigger queue ``queue`` keeps its key (its declaration's setting)."""
    return trigger_queue(queue).release_ttl(settings)
