"""``kickoff actions``: an action's delivery and verification state; report and verify results."""

from __future__ import annotations

import click

from cli.common import echo_answer, echo_json, json_option, parse_assignments
from cli.context import CliContext


@click.group()
def actions() -> None:
    """Activity actions after they left kickoff.

    A queued action only means its message left kickoff. The consumer reports what it did
    (`actions result`, or POST /v1/actions/{tracking_id}/result); the verification step (every
    minute, or `actions verify`) marks the action succeeded, or failed with the reason.
    """


@actions.command("show")
@click.argument("tracking_id")
@json_option("Print one JSON object.")
@click.pass_obj
def show_cmd(obj: CliContext, tracking_id: str, as_json: bool) -> None:
    """The action, its delivery (outbox message, published at, attempts) and its verification.

    A result reported after the action was settled (e.g. failed as unreported) is shown as late:
    it is kept beside the action and never changes it.
    """
    from publisher.results import action_state

    obj.database()
    state = action_state(tracking_id)
    if as_json:
        echo_json(state)
        return
    delivery = state["delivery"] or {}
    verification = state["verification"]
    click.echo(f"action {state['tracking_id']} ({state['queue']}, team {state['team']}): {state['status']}")
    creator = state["created_by"]
    click.echo(
        "created by: "
        + (f"API key {creator['name']} ({creator['key_id']})" if creator else "no API key (the box)")
    )
    click.echo(
        f"delivery: {delivery.get('status', '-')}; published at {delivery.get('published_at') or '-'}; "
        f"attempts {delivery.get('attempts', 0)}; last error {delivery.get('last_error') or '-'}"
    )
    reason = verification.get("reason") or (None if verification.get("late") else state["error"])
    click.echo(
        f"verification: {verification['status']}; outcome {verification.get('outcome') or '-'}; "
        f"reason {reason or '-'}"
    )
    if verification.get("late"):
        click.echo(
            f"late: this result was reported after the action was {state['status']}; it is kept here "
            "and the action was left as it is"
        )


@actions.command("result")
@click.argument("tracking_id")
@click.option(
    "--outcome", type=click.Choice(["succeeded", "failed"]), required=True, help="What the worker did."
)
@click.option("--detail", "details", multiple=True, metavar="KEY=VALUE", help="Result details (repeatable).")
@click.option("--by", "reported_by", default=None, help="Who reports (the consumer's name).")
@json_option("Print one JSON object.")
@click.pass_obj
def result_cmd(
    obj: CliContext,
    tracking_id: str,
    outcome: str,
    details: tuple[str, ...],
    reported_by: str | None,
    as_json: bool,
) -> None:
    """Report a consumer's result of an action (verified at the next verification)."""
    from publisher.results import report_result

    obj.database()
    out = report_result(
        tracking_id,
        outcome=outcome,
        details=parse_assignments(details, option="--detail"),
        reported_by=reported_by,
        audit=obj.audit(),
    )
    echo_answer(
        as_json, out, f"result of {tracking_id} reported ({outcome}); verified at the next verification"
    )


@actions.command("verify")
@json_option("Print one JSON object.")
@click.pass_obj
def verify_cmd(obj: CliContext, as_json: bool) -> None:
    """Run one verification now: settle every reported result; fail long-unreported actions.

    A late result (its action already settled) is checked and kept, never applied; a result that
    cannot be settled is set aside with its reason; the others are settled all the same.
    """
    from publisher.results import verify_results

    obj.database()
    report = verify_results(result_timeout_seconds=obj.settings.action_result_timeout_seconds)
    if as_json:
        echo_json(report.as_json())
        return
    click.echo(
        f"verified {len(report.verified)}, failed {len(report.failed)} "
        f"({len(report.unreported)} unreported), late {len(report.late)}, set aside {len(report.set_aside)}"
    )
