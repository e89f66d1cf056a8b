"""``kickoff trigger``: queue lineup, waiver, draft-pick and rumor-action requests through the outbox."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from cli.answers import EXIT_CODES_HELP, publisher_answers
from cli.common import echo_answer, echo_json, json_option
from cli.context import CliContext
from config.clock import parse_iso8601
from models.activity import ActionStatus
from publisher.actions import RESULT_STATUSES, get_action, record_result
from publisher.amqp import publisher_from_settings
from publisher.idempotency import draft_key, lineup_key, waiver_key
from publisher.rumor import RumorRequest, RumorSignal, evaluate_rumors, signals_from_json
from publisher.triggers import (
    DraftPickRequest,
    LineupRequest,
    TriggerResult,
    TriggerStatus,
    WaiverRequest,
    trigger_draft_pick,
    trigger_lineup,
    trigger_waiver,
)


def _player_id(value: str) -> Any:
    """An integer (ESPN id) when it parses as one; otherwise the string, which validation refuses."""
    try:
        return int(value)
    except ValueError:
        return value


def _swap(text: str) -> dict[str, Any]:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise click.BadParameter(f"expected PLAYER_ID:SLOT[:ir], got {text!r}", param_hint="--swap")
    swap: dict[str, Any] = {"player_id": _player_id(parts[0]), "to_slot": parts[1]}
    if len(parts) == 3:
        swap["kind"] = parts[2]
    return swap


def _inputs(season: int | None, week: int | None) -> dict[str, Any]:
    return {k: val for k, val in (("season", season), ("week", week)) if val is not None}


def _print(result: TriggerResult, as_json: bool) -> None:
    if as_json:
        echo_json(result.as_json())
        return
    extra = ""
    if result.held:
        extra = " (held until its IR move succeeds)"
    elif result.status is TriggerStatus.PENDING:
        extra = " (saved; the broker did not confirm it yet, the outbox drain will publish it)"
    elif result.status is TriggerStatus.DUPLICATE and not result.published:
        extra = " (the earlier request's message is not delivered yet; the outbox drain publishes it)"
    click.echo(f"{result.status.value} {result.tracking_id}{extra}")


LEAGUE_OPTION = click.option("--league", "league_id", required=True, help="Fantasy league id.")
TEAM_OPTION = click.option("--team", required=True, help="Team id in the league.")

API_URL_META = "kickoff_api_url"


def _remember_api(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        ctx.meta[API_URL_META] = value
    return value


api_option = click.option(
    "--api",
    metavar="URL",
    default=None,
    expose_value=False,
    callback=_remember_api,
    help="Send through the HTTP API at URL (key from KICKOFF_API_KEY), retrying connection errors, "
    "timeouts and 5xx (TRIGGER_RETRY_*), instead of publishing from this process.",
)


def _api_client(obj: CliContext) -> Any:
    """The HTTP trigger client when --api was given, else None."""
    url = click.get_current_context().meta.get(API_URL_META)
    if not url:
        return None
    from publisher.trigger_http import API_KEY_ENV, HttpTriggerClient

    key = os.environ.get(API_KEY_ENV)
    if not key:
        raise click.UsageError(f"--api needs an API key in {API_KEY_ENV}")
    return HttpTriggerClient(base_url=url, api_key=key, settings=obj.settings)


def _send(obj: CliContext, send: Callable[..., TriggerResult], request: Any, as_json: bool) -> None:
    """Send ``request`` with the trigger function ``send`` (or through --api) and print its answer."""
    client = _api_client(obj)
    if client is not None:
        with client:
            data = client.send(request)
        _print(
            TriggerResult(
                TriggerStatus(data["status"]),
                data["tracking_id"],
                published=bool(data.get("published")),
                held=bool(data.get("held")),
            ),
            as_json,
        )
        return
    obj.database()
    with publisher_from_settings(obj.settings) as publisher:
        _print(send(request, publisher=publisher, settings=obj.settings), as_json)


@click.group(epilog=EXIT_CODES_HELP)
def trigger() -> None:
    """Queue moves for the browser worker (lineup_updates, waiver_actions, draft_targets).

    Each command validates first (player ids are ESPN ids: integers), saves the action with its
    message in one transaction, publishes at once and prints the answer with the tracking id:
    `queued` (RabbitMQ confirmed the message), `pending` (saved; RabbitMQ did not confirm it, or
    a chained claim is held, and the outbox drain publishes it later) or `duplicate` (the key
    belongs to an earlier action). A draft pick that could not be delivered answers
    `unavailable` (exit 5): retry with the same key, which tries the delivery again at once.
    """


key_options = [
    click.option(
        "--key", "key", default=None, help="Explicit idempotency key (default: built by the key builder)."
    ),
    click.option("--no-key", is_flag=True, help="Send no key: the request always publishes (manual moves)."),
    click.option("--traceparent", default=None, help="W3C traceparent to put in the body and AMQP headers."),
    json_option('Print {"status": ..., "tracking_id": ..., "published": ..., "held": ...}.'),
    api_option,
]


@dataclass(frozen=True)
class CommonArgs:
    """What every move command takes: --league, --team and the key options."""

    league_id: str
    team: str
    key: str | None
    no_key: bool
    traceparent: str | None

    def request_fields(self, built_key: str | None) -> dict[str, Any]:
        """League, team, traceparent and the key: --key, none with --no-key, else ``built_key``."""
        key = self.key if self.key is not None else built_key
        return {
            "league_id": self.league_id,
            "team": self.team,
            "idempotency_key": None if self.no_key else key,
            "traceparent": self.traceparent,
        }


def move_command(
    name: str, send: Callable[..., TriggerResult], *own_options: Callable[[Any], Any]
) -> Callable[[Callable[..., Any]], click.Command]:
    """Register ``kickoff trigger NAME``: --league, --team, ``own_options``, then the key options.

    The decorated function takes CommonArgs and its own options and returns the request; the
    command sends it with ``send`` (or through --api) and prints the answer.
    """

    def decorate(build: Callable[..., Any]) -> click.Command:
        @functools.wraps(build)
        def command(obj: CliContext, league_id, team, key, no_key, traceparent, as_json, **own: Any) -> None:
            request = build(CommonArgs(league_id, team, key, no_key, traceparent), **own)
            _send(obj, send, request, as_json)

        options = [LEAGUE_OPTION, TEAM_OPTION, *own_options, *key_options]
        decorated: Any = publisher_answers(command)
        decorated = click.pass_obj(decorated)
        for option in reversed(options):
            decorated = option(decorated)
        return trigger.command(name, epilog=EXIT_CODES_HELP)(decorated)

    return decorate


@move_command(
    "lineup",
    trigger_lineup,
    click.option(
        "--swap", "swaps", multiple=True, required=True, help="PLAYER_ID:SLOT[:ir] (ESPN id); repeatable."
    ),
    click.option("--season", type=int, default=None, help="Season (part of the key and its suffix)."),
    click.option("--week", type=int, default=None, help="Week (part of the key and its suffix)."),
    click.option(
        "--job-name", default=lambda: os.environ.get("JOB_NAME", "cli"), help="Job name in the key."
    ),
)
def lineup_cmd(common: CommonArgs, swaps, season, week, job_name) -> LineupRequest:
    """Queue a lineup change; a swap ending in `:ir` is an IR move a waiver claim can chain behind."""
    parsed = [_swap(s) for s in swaps]
    built = None
    if season is not None and week is not None:
        built = lineup_key(job_name=job_name, team=common.team, season=season, week=week, swaps=parsed)
    return LineupRequest(swaps=parsed, decision_inputs=_inputs(season, week), **common.request_fields(built))


@move_command(
    "waiver",
    trigger_waiver,
    click.option("--add", "add_player_id", required=True, help="ESPN id of the player to claim."),
    click.option("--drop", "drop_player_id", default=None, help="ESPN id of the player to drop."),
    click.option("--bid", type=int, default=None, help="FAAB bid."),
    click.option(
        "--after", "after_tracking_id", default=None, help="Tracking id of the IR move to wait for."
    ),
    click.option(
        "--ir-player", "ir_player_id", type=int, default=None, help="ESPN id moved to IR (part of the key)."
    ),
    click.option("--season", type=int, default=None, help="Season (no key is sent without season and week)."),
    click.option("--week", type=int, default=None, help="Week."),
)
def waiver_cmd(
    common: CommonArgs, add_player_id, drop_player_id, bid, after_tracking_id, ir_player_id, season, week
) -> WaiverRequest:
    """Queue a waiver claim; with --after it waits for that IR move (and must not --drop)."""
    add = _player_id(add_player_id)
    drop = None if drop_player_id is None else _player_id(drop_player_id)
    built = None
    if isinstance(add, int):
        built = waiver_key(
            team=common.team,
            season=season,
            week=week,
            add_player_id=add,
            drop_player_id=drop,
            ir_player_id=ir_player_id,
        )
    return WaiverRequest(
        add_player_id=add,
        drop_player_id=drop,
        bid=bid,
        after_tracking_id=after_tracking_id,
        decision_inputs=_inputs(season, week),
        **common.request_fields(built),
    )


@move_command(
    "draft-pick",
    trigger_draft_pick,
    click.option("--pick", "pick_number", type=int, required=True, help="Overall pick number."),
    click.option("--espn-id", required=True, help="ESPN id of the player to draft."),
    click.option(
        "--expires-at", default=None, help="ISO 8601 time with offset when the pick's clock runs out."
    ),
)
def draft_cmd(common: CommonArgs, pick_number, espn_id, expires_at) -> DraftPickRequest:
    """Queue a draft target that expires with its pick (default: DRAFT_TARGET_DEFAULT_EXPIRY_SECONDS).

    Answers `queued` once RabbitMQ confirmed it. A filled or expired pick is a conflict (exit
    4); a target that could not be delivered is `unavailable` (exit 5, the tracking id is
    printed): retry with the same key and it is published again at once. A target whose
    message is dead (refused to the last attempt) is a conflict (exit 4): revive it with
    `kickoff outbox retry-dead ROW_ID` or send a new key.
    """
    espn = _player_id(espn_id)
    deadline: datetime | None = None if expires_at is None else parse_iso8601(expires_at, what="--expires-at")
    built = (
        draft_key(league_id=common.league_id, pick_number=pick_number, espn_id=espn)
        if isinstance(espn, int)
        else None
    )
    return DraftPickRequest(
        pick_number=pick_number, espn_id=espn, expires_at=deadline, **common.request_fields(built)
    )


@trigger.command("rumor-action", epilog=EXIT_CODES_HELP)
@LEAGUE_OPTION
@TEAM_OPTION
@click.option("--season", type=int, required=True, help="Season.")
@click.option("--week", type=int, required=True, help="Week.")
@click.option("--roster", "roster", multiple=True, help="ESPN_ID=SLOT of a rostered player; repeatable.")
@click.option(
    "--signal",
    "signals",
    multiple=True,
    help='JSON signal, e.g. {"player_id": 1, "kind": '
    '"ruled_out", "confidence": 0.9}; repeatable. Kinds: ruled_out, season_ending, breakout.',
)
@click.option("--traceparent", default=None, help="W3C traceparent for the resulting messages.")
@json_option('Print {"outcomes": [one object per signal]}.')
@api_option
@click.pass_obj
@publisher_answers
def rumor_cmd(obj: CliContext, league_id, team, season, week, roster, signals, traceparent, as_json):
    """Weigh rumor signals and send the resulting moves through the lineup and waiver triggers.

    Rules: a ruled-out starter is benched; a season-ending injury goes to IR and its
    replacement is claimed behind that IR move; a breakout free agent is claimed dropping the
    named player. Signals below confidence 0.7 are ignored.
    """
    request = RumorRequest(
        league_id=league_id,
        team=team,
        season=season,
        week=week,
        roster=_roster(roster),
        signals=_signals(signals),
        traceparent=traceparent,
    )
    client = _api_client(obj)
    if client is not None:
        with client:
            answers = client.send(request)["outcomes"]
    else:
        obj.database()
        with publisher_from_settings(obj.settings) as publisher:
            outcomes = evaluate_rumors(request, publisher=publisher, settings=obj.settings)
        answers = [outcome.as_json() for outcome in outcomes]
    if as_json:
        echo_json({"outcomes": answers})
        return
    for data in answers:
        _print_outcome(data)


def _roster(items: tuple[str, ...]) -> dict[Any, str]:
    """--roster ESPN_ID=SLOT values as {player id: slot}."""
    roster: dict[Any, str] = {}
    for item in items:
        pid, sep, slot = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected ESPN_ID=SLOT, got {item!r}", param_hint="--roster")
        roster[_player_id(pid)] = slot
    return roster


def _signals(texts: tuple[str, ...]) -> list[RumorSignal]:
    """--signal JSON values as rumor signals."""
    try:
        return signals_from_json(json.loads(s) for s in texts)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--signal") from exc


def _print_outcome(data: dict[str, Any]) -> None:
    """Print one rumor outcome (RumorOutcome.as_json(), also the API's answer) as a line."""
    if data["ignored"]:
        click.echo(f"{data['kind']} {data['player_id']}: ignored ({data['ignored']})")
    else:
        sent = ", ".join(f"{r['status']} {r['tracking_id']}" for r in data["results"])
        click.echo(f"{data['kind']} {data['player_id']}: {data['rule']}: {sent}")


@trigger.command("show")
@click.argument("tracking_id")
@json_option('Print the action: {"tracking_id", "status", ...}.')
@click.pass_obj
def show_cmd(obj: CliContext, tracking_id: str, as_json: bool) -> None:
    """Show an action's status, key, chain and run by tracking id (exit 2 if unknown)."""
    obj.database()
    view = get_action(tracking_id)
    data = {
        k: (str(val) if val is not None and not isinstance(val, str) else val)
        for k, val in vars(view).items()
    }
    if as_json:
        echo_json(data)
    else:
        for name, val in data.items():
            click.echo(f"{name}: {val}")


@trigger.command("result", epilog=EXIT_CODES_HELP)
@click.argument("tracking_id")
@click.argument("status", type=click.Choice(sorted(s.value for s in RESULT_STATUSES)))
@click.option("--error", default=None, help="Failure text to record.")
@json_option('Print {"tracking_id", "status"}.')
@click.pass_obj
@publisher_answers
def result_cmd(obj: CliContext, tracking_id: str, status: str, error: str | None, as_json: bool) -> None:
    """Record the worker's verified result for an action (releases or cancels chained claims).

    Only a pending action (queued, delivered, running) moves; a finished one (succeeded,
    failed, skipped) is a conflict (exit 4) and is left as it is. Prints TRACKING_ID: STATUS.
    """
    obj.database()
    record_result(tracking_id, ActionStatus(status), error=error)
    echo_answer(as_json, {"tracking_id": tracking_id, "status": status}, f"{tracking_id}: {status}")
