"""The AsyncAPI contract: real publisher output read back from RabbitMQ validates; extras are rejected."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator, FormatChecker

from publisher import trades
from publisher.alerts import InjuryChange, publish_injury_alerts
from publisher.queues import ALL_QUEUES
from publisher.triggers import trigger_draft_pick, trigger_lineup, trigger_waiver
from runs.command import RunCommand
from tests.publisher.helpers import TRACEPARENT, counter, draft, lineup, offer, waiver

SPEC = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"


@cache
def spec() -> dict[str, Any]:
    return yaml.safe_load(SPEC.read_text())


def validator(ref: str) -> Draft7Validator:
    """A validator for ``#/components/...`` refs of the contract (resolved inside the document)."""
    return Draft7Validator({"$ref": ref, "components": spec()["components"]}, format_checker=FormatChecker())


def message(name: str) -> dict[str, Any]:
    return spec()["components"]["messages"][name]


def check(name: str, body: dict[str, Any], headers: dict[str, Any] | None) -> None:
    m = message(name)
    validator(m["payload"]["$ref"]).validate(body)
    validator(m["headers"]["$ref"]).validate(headers or {})


def test_the_contract_has_one_channel_per_queue_constant():
    addresses = sorted(c["address"] for c in spec()["channels"].values())
    assert addresses == sorted(ALL_QUEUES)
    assert spec()["asyncapi"].startswith("3.")


def test_every_operation_sends_persistent_mandatory_messages():
    binding = spec()["components"]["operationBindings"]["confirmedPersistent"]["amqp"]
    assert binding["deliveryMode"] == 2 and binding["mandatory"] is True
    assert len(spec()["operations"]) == sum(len(c["messages"]) for c in spec()["channels"].values())


@pytest.mark.parametrize("name", sorted(yaml.safe_load(SPEC.read_text())["components"]["messages"]))
def test_every_example_validates(name):
    for example in message(name)["examples"]:
        validator(message(name)["payload"]["$ref"]).validate(example["payload"])


def test_the_format_checker_checks_date_times():
    # jsonschema checks "date-time" only with its RFC 3339 dependency installed; prove it does.
    assert "date-time" in FormatChecker().checkers
    [example] = message("LineupUpdate")["examples"][:1]
    bad = {**example["payload"], "created_at": "yesterday at noon"}
    with pytest.raises(Exception, match="date-time"):
        validator(message("LineupUpdate")["payload"]["$ref"]).validate(bad)


def test_the_run_command_example_has_exactly_the_fields_the_code_writes():
    written = RunCommand(run_id="r", job="j", attempt=1, trigger="schedule", dedupe_key="k").to_dict()
    for example in message("RunCommand")["examples"]:
        assert set(example["payload"]) == set(written)
        assert RunCommand.from_dict(example["payload"]).to_dict() == example["payload"]


def _lineup(p, s):
    request = lineup(
        swaps=[{"player_id": 1, "to_slot": "IR", "kind": "ir"}],
        traceparent=TRACEPARENT,
        decision_inputs={"season": 2024, "week": 2},
    )
    trigger_lineup(request, publisher=p, settings=s)


def _waiver(p, s):
    trigger_waiver(waiver(), publisher=p, settings=s)


def _draft(p, s):
    from datetime import timedelta

    from config.clock import utcnow

    trigger_draft_pick(draft(expires_at=utcnow() + timedelta(minutes=2)), publisher=p, settings=s)


def _alert(p, s):
    change = InjuryChange(
        player_id="4046", player_name="X", previous_status=None, status="Out", rostered=True
    )
    publish_injury_alerts([change], publisher=p)


def _submission(p, s):
    offer(p)


def _response(p, s):
    trades.respond_to_trade(
        decision_key="d1", league_id="L1", team="7", trade_id="t", decision="reject", publisher=p
    )


def _negotiation(p, s):
    counter(p)


def _run_command(p, s):
    from runs.catalog import load_catalog
    from runs.publish import publish_run

    result = publish_run("noop", trigger="cli", catalog=load_catalog(s.job_catalog_path), publisher=p)
    assert result.status == "queued", result


@pytest.mark.parametrize(
    ("produce", "queue", "name"),
    [
        pytest.param(_lineup, "lineup_updates", "LineupUpdate", id="lineup_updates"),
        pytest.param(_waiver, "waiver_actions", "WaiverClaim", id="waiver_actions-claim"),
        pytest.param(_alert, "waiver_actions", "InjuryAlert", id="waiver_actions-injury-alert"),
        pytest.param(_draft, "draft_targets", "DraftTarget", id="draft_targets"),
        pytest.param(_submission, "trade_submissions", "TradeSubmission", id="trade_submissions"),
        pytest.param(_response, "trade_responses", "TradeResponse", id="trade_responses"),
        pytest.param(_negotiation, "trade_negotiations", "TradeNegotiation", id="trade_negotiations"),
        pytest.param(_run_command, "job_runs", "RunCommand", id="job_runs"),
    ],
)
def test_real_publisher_output_read_back_from_rabbitmq_matches_the_contract(
    publisher, pub_settings, read_queue, produce, queue, name
):
    produce(publisher, pub_settings)
    [(body, props)] = read_queue(queue)
    assert props.delivery_mode == 2 and props.content_type == "application/json" and props.message_id
    check(name, body, props.headers)
    extra = {**body, "decision_inputs": {"season": 2024}}
    with pytest.raises(Exception, match="Additional properties"):
        validator(message(name)["payload"]["$ref"]).validate(extra)
