"""``kickoff trigger``: queue lineup, waiver, draft-pick and rumor-action requests through the outbox."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import click

from cli.answers import EXIT_CODES_HELP, publisher_answers
from cli.common import echo_answer, echo_json, json_option
from cli.context import CliContext
from config.errors import KickoffError
from models.activity import ActionStatus
from models.history_recorder import recorder
from players.rumors import RumorRequest, RumorSignal, evaluate_rumors, signals_from_json
from publisher.actions import RESULT_STATUSES, get_action, record_result
from publisher.amqp import publisher_from_settings
from publisher.trigger_queues import KeyInput, TriggerQueue, trigger_queues
from publisher.trigger_requests import TriggerRequest, cli_option, player_id_of
from publisher.triggers import TriggerResult, TriggerStatus, send


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
    from client.trigger_http import API_KEY_ENV, HttpTriggerClient

    key = os.environ.get(API_KEY_ENV)
    if not key:
        raise click.UsageError(f"--api needs an API key in {API_KEY_ENV}")
    return HttpTriggerClient(base_url=url, api_key=key, settings=obj.settings)


def _send(obj: CliContext, queue: TriggerQueue, request: TriggerRequest, as_json: bool) -> None:
    """Send ``request`` with ``queue``'s trigger function (or through --api) and print its answer."""
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
    recorder.enable()  # the answer is history (models.history_recorder), written when the command is done
    try:
        with publisher_from_settings(obj.settings) as publisher:
            _print(send(queue, request, publisher=publisher, settings=obj.settings), as_json)
    finally:
        recorder.flush()


class TriggerCommands(click.Group):
    """``kickoff trigger``: a command per trigger queue declared now (``publisher.trigger_queues``),
    built from its declaration when looked up, and the commands registered on the group; its
    --help names those queues in place of ``{queues}``."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        queues = ", ".join(q.name for q in trigger_queues())
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(inspect.cleandoc(self.help or "").format(queues=queues))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*(q.command for q in trigger_queues()), *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for queue in trigger_queues():
            if queue.command == cmd_name:
                return queue_command(queue)
        return super().get_command(ctx, cmd_name)


@click.group(cls=TriggerCommands, epilog=EXIT_CODES_HELP)
def trigger() -> None:
    """Queue moves for the browser worker: a command per trigger queue, and the actions' tools.

    The trigger queues: {queues}. Each command validates first (player ids are ESPN ids:
    integers), saves the action with its message in one transaction, publishes at once and
    prints the answer with the tracking id: `queued` (RabbitMQ confirmed the message), `pending`
    (saved; RabbitMQ did not confirm it, or a chained claim is held, and the outbox drain
    publishes it later) or `duplicate` (the key belongs to an earlier action). A draft pick that
    could not be delivered answers `unavailable` (exit 5): retry with the same key, which tries
    the delivery again at once.
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


def _field_option(request: type[TriggerRequest], name: str) -> click.Option:
    """The option of request field ``name``: its flag, type and syntax (CliOption), its description
    as --help, required when the field is."""
    spelled = cli_option(request, name)
    info = request.model_fields[name]
    help_text = info.description or ""
    if spelled.multiple:
        help_text += " Repeatable."
    return click.Option(
        [spelled.flag or "--" + name.replace("_", "-"), name],
        type=spelled.type,
        metavar=spelled.syntax,
        multiple=spelled.multiple,
        required=info.is_required(),
        default=None,
        help=help_text,
    )


def _key_input_option(key_input: KeyInput) -> click.Option:
    return click.Option(
        [key_input.flag, key_input.name],
        type=key_input.type,
        default=key_input.default,
        help=key_input.help,
    )


def _field_value(request: type[TriggerRequest], name: str, typed: Any) -> Any:
    """The field's value from what was typed: parsed by its CliOption (a ValueError is a usage error)."""
    spelled = cli_option(request, name)
    if typed is None or spelled.parse is None:
        return list(typed) if spelled.multiple and typed is not None else typed
    flag = spelled.flag or "--" + name.replace("_", "-")
    try:
        if spelled.multiple:
            return [spelled.parse(item) for item in typed]
        return spelled.parse(typed)
    except KickoffError:
        raise
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from exc


def build_request(queue: TriggerQueue, typed: dict[str, Any]) -> TriggerRequest:
    """``queue``'s request from the options typed (unchecked: the trigger checks it and names a
    refused field), with its key: --key, none with --no-key, else the queue's recipe."""
    model = queue.request
    inputs = {k.name: typed[k.name] for k in queue.key_inputs}
    decision_inputs = {k.name: typed[k.name] for k in queue.key_inputs if k.decision_input}
    values: dict[str, Any] = {
        "league_id": typed["league_id"],
        "team_id": typed["team_id"],
        "traceparent": typed["traceparent"],
        "decision_inputs": {k: v for k, v in decision_inputs.items() if v is not None},
    }
    for name in model.own_fields():
        values[name] = _field_value(model, name, typed[name])
    request = model.unchecked(**values)
    key = typed["key"] if typed["key"] is not None else queue.key(request, inputs)
    return model.unchecked(**values, idempotency_key=None if typed["no_key"] else key)


def queue_command(queue: TriggerQueue) -> click.Command:
    """``kickoff trigger COMMAND`` of ``queue``: --league, --team, an option per request field,
    the key recipe's inputs, then the key options; it sends the request (or through --api)."""
    model = queue.request

    @publisher_answers
    def run(as_json: bool, **typed: Any) -> None:
        _send(click.get_current_context().obj, queue, build_request(queue, typed), as_json)

    params: list[click.Parameter] = [
        _field_option(model, "league_id"),
        _field_option(model, "team_id"),
        *(_field_option(model, name) for name in model.own_fields()),
        *(_key_input_option(k) for k in queue.key_inputs),
    ]
    command = click.Command(
        queue.command,
        callback=run,
        params=params,
        help=f"{queue.summary}\n\n{queue.help}".strip(),
        epilog=EXIT_CODES_HELP,
    )
    for option in key_options:
        option(command)  # appended in order: --key, --no-key, --traceparent, --json, --api
    return command


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
        roster[player_id_of(pid)] = slot
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
