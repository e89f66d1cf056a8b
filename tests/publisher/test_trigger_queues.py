"""One declaration per trigger queue: everything derives from it, and a fourth queue needs only it.

The throwaway fourth queue (``keeper_designations``) is declared in this process by a fixture,
as docs/adding-a-trigger-queue.md has a newcomer declare one; its route, scope, CLI command,
key TTL and contract check appear, and its channel missing from the contract is a clear error.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from click.testing import CliRunner
from pydantic import Field

from api.app import create_app
from api.auth import Need, route_rules
from cli.main import cli
from config.clock import utcnow
from config.settings import MatchListenerEnvironment
from publisher.contract import check_trigger_queue, load_contract
from publisher.errors import ContractMismatch, TriggerUnavailableError
from publisher.queues import DELIVERY, OUTBOX_QUEUES, TRIGGER_QUEUES, Delivery, declare_passive
from publisher.trigger_queues import (
    ROUTE_PREFIX,
    TriggerQueue,
    registered,
    release_ttl,
    trigger_queue,
    trigger_queues,
)
from publisher.trigger_requests import CliOption, EspnId, TriggerRequest, player_id_of
from publisher.trigger_saves import TriggerResult, TriggerSave, TriggerStatus
from publisher.triggers import send


class KeeperRequest(TriggerRequest):
    """A keeper designation: the ESPN player a team keeps for next season."""

    keeper_player_id: Annotated[EspnId, CliOption("--keeper", parse=player_id_of)] = Field(
        description="ESPN id of the player to keep."
    )
    note: str | None = Field(None, max_length=200, description="Why (kept with the action).")


KEEPER = TriggerQueue(
    name="keeper_designations",
    request=KeeperRequest,
    command="keeper",
    summary="Queue a keeper designation (keeper_designations).",
    help="The worker marks the player as kept on ESPN.",
    ttl=timedelta(days=1),
    scope="operator",
    channel="keeperDesignations",
    message="KeeperDesignation",
)

#: The fourth queue's part of docs/asyncapi.yaml (what the page has the newcomer write).
KEEPER_CHANNEL = {
    "address": "keeper_designations",
    "description": "Keeper designations from the keeper trigger (outbox).",
    "messages": {"keeperDesignation": {"$ref": "#/components/messages/KeeperDesignation"}},
    "bindings": {
        "amqp": {
            "is": "queue",
            "queue": {"name": "keeper_designations", "durable": True},
            "bindingVersion": "0.3.0",
        }
    },
}
KEEPER_MESSAGE = {
    "name": "KeeperDesignation",
    "title": "Keeper designation",
    "contentType": "application/json",
    "headers": {"$ref": "#/components/schemas/TraceHeaders"},
    "payload": {"$ref": "#/components/schemas/KeeperDesignation"},
}
KEEPER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "tracking_id",
        "league_id",
        "team_id",
        "keeper_player_id",
        "note",
        "traceparent",
        "created_at",
    ],
    "properties": {
        "tracking_id": {"$ref": "#/components/schemas/TrackingId"},
        "league_id": {"$ref": "#/components/schemas/Id"},
        "team_id": {"$ref": "#/components/schemas/Id"},
        "keeper_player_id": {"$ref": "#/components/schemas/EspnId"},
        "note": {"type": ["string", "null"]},
        "traceparent": {"$ref": "#/components/schemas/Traceparent"},
        "created_at": {"$ref": "#/components/schemas/Time"},
    },
}


def contract_with_keeper() -> dict[str, Any]:
    doc = load_contract()
    doc["channels"]["keeperDesignations"] = copy.deepcopy(KEEPER_CHANNEL)
    doc["components"]["messages"]["KeeperDesignation"] = copy.deepcopy(KEEPER_MESSAGE)
    doc["components"]["schemas"]["KeeperDesignation"] = copy.deepcopy(KEEPER_SCHEMA)
    return doc


@pytest.fixture
def keeper() -> Iterator[TriggerQueue]:
    """The fourth trigger queue, declared in this process for the test."""
    with registered(KEEPER) as queue:
        yield queue


# -- the three declared queues -------------------------------------------------------


@pytest.mark.parametrize("queue", trigger_queues(), ids=lambda q: q.name)
def test_every_declared_queue_has_its_channel_and_the_payload_matches_its_request_model(queue):
    channel = check_trigger_queue(queue)
    assert channel.queue == queue.name


def test_the_queue_lists_and_deliveries_derive_from_the_declarations():
    names = tuple(q.name for q in trigger_queues())
    assert names == TRIGGER_QUEUES == ("lineup_updates", "waiver_actions", "draft_targets")
    assert set(names) <= set(OUTBOX_QUEUES)
    assert all(DELIVERY[name] is Delivery.OUTBOX for name in names)


def test_each_declared_route_needs_its_declared_scope(settings):
    rules = route_rules(create_app(settings))
    for queue in trigger_queues():
        assert rules[("POST", queue.path)] is Need(queue.scope)


def test_the_key_release_ttl_is_the_declared_setting(settings):
    assert release_ttl("lineup_updates", settings) == timedelta(
        seconds=settings.idempotency_ttl_lineup_seconds
    )
    assert release_ttl("waiver_actions", settings) == timedelta(
        seconds=settings.idempotency_ttl_waiver_seconds
    )
    assert release_ttl("draft_targets", settings) == timedelta(seconds=settings.idempotency_ttl_draft_seconds)


def test_a_changed_field_type_in_the_contract_fails_naming_the_field():
    doc = load_contract()
    doc["components"]["schemas"]["DraftTarget"]["properties"]["espn_id"] = {"type": "string"}
    with pytest.raises(ContractMismatch, match=r"field espn_id is \['string'\]"):
        check_trigger_queue(trigger_queue("draft_targets"), doc)


def test_a_published_field_missing_from_the_contract_fails_naming_both_sides():
    doc = load_contract()
    del doc["components"]["schemas"]["WaiverClaim"]["properties"]["bid"]
    with pytest.raises(ContractMismatch, match=r"carries \['add_player_id', 'drop_player_id'\]"):
        check_trigger_queue(trigger_queue("waiver_actions"), doc)


# -- a fourth queue, declared in-process -----------------------------------------------


def test_a_fourth_queue_without_its_channel_fails_the_contract_check_clearly(keeper):
    with pytest.raises(ContractMismatch, match=r"no channel .keeperDesignations.*docs/asyncapi\.yaml"):
        check_trigger_queue(keeper)


def test_a_fourth_queue_with_its_channel_passes_the_contract_check(keeper):
    assert check_trigger_queue(keeper, contract_with_keeper()).queue == "keeper_designations"


def test_a_fourth_queue_gets_its_route_with_its_scope_body_and_statuses(keeper, settings):
    app = create_app(settings)
    assert route_rules(app)[("POST", f"{ROUTE_PREFIX}/keeper")] is Need.OPERATOR
    operation = app.openapi()["paths"][f"{ROUTE_PREFIX}/keeper"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/KeeperRequest"
    }
    assert {"200", "202", "401", "403", "409", "422", "503"} <= set(operation["responses"])
    schema = app.openapi()["components"]["schemas"]["KeeperRequest"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["keeper_player_id"]["description"] == "ESPN id of the player to keep."


def test_a_fourth_queue_gets_its_cli_command_with_options_from_its_model(keeper):
    listing = CliRunner().invoke(cli, ["trigger", "--help"]).output
    assert "keeper" in listing and "Queue a keeper designation" in listing
    out = CliRunner().invoke(cli, ["trigger", "keeper", "--help"]).output
    assert "--keeper TEXT" in out and "ESPN id of the player to keep." in out
    assert "--note TEXT" in out and "--league" in out and "--no-key" in out and "--api URL" in out


def test_a_fourth_queue_gets_its_ttl_and_is_declared_passive_on_publish(keeper, settings):
    assert release_ttl("keeper_designations", settings) == timedelta(days=1)
    assert declare_passive("keeper_designations")


def test_the_fourth_queue_is_gone_after_the_fixture():
    assert "keeper_designations" not in {q.name for q in trigger_queues()}
    assert "keeper" not in CliRunner().invoke(cli, ["trigger", "--help"]).output.split()


@pytest.mark.parametrize("queue", trigger_queues(), ids=lambda q: q.name)
def test_every_declared_ttl_resolves_to_a_positive_duration(queue, settings):
    assert queue.release_ttl(settings) > timedelta(0)


def test_the_route_is_the_command():
    assert [q.path for q in trigger_queues()] == [
        f"{ROUTE_PREFIX}/lineup",
        f"{ROUTE_PREFIX}/waiver",
        f"{ROUTE_PREFIX}/draft-pick",
    ]


@pytest.mark.parametrize("command", ["/keeper", "keeper designation", "Keeper", "keeper-", "keeper/x"])
def test_a_command_that_cannot_be_a_route_segment_is_refused_at_once(command):
    with pytest.raises(ValueError, match="is not a lowercase word"):
        TriggerQueue(**{**vars(KEEPER), "command": command})


def test_a_declaration_with_an_unknown_scope_is_refused_at_once():
    with pytest.raises(ValueError, match="scope 'operater' is not one of"):
        TriggerQueue(**{**vars(KEEPER), "scope": "operater"})


def test_a_queue_name_cannot_be_declared_twice():
    with pytest.raises(ValueError, match="declared already"), registered(trigger_queue("lineup_updates")):
        pass


# -- a fourth queue's save builder, must-deliver and help text come from its declaration ------


def keeper_save(queue, request, common, settings) -> TriggerSave:
    """The keeper queue's own save builder (named by ``KEEPER_WITH_RULES.save``)."""
    fields = {"keeper_player_id": request.keeper_player_id, "note": "by its builder"}
    return common.save(
        queue=queue.name,
        published=fields,
        stored=fields,
        espn_ids={"keeper_player_id": request.keeper_player_id},
        now=utcnow(),
    )


KEEPER_WITH_RULES = dataclasses.replace(KEEPER, save=f"{__name__}:keeper_save", must_deliver=True)


class RecordingCommitter:
    """A committer that keeps the saves and answers a fixed outcome (no database, no broker)."""

    def __init__(self, *, published: bool) -> None:
        self.published = published
        self.saves: list[TriggerSave] = []

    def submit(self, save: TriggerSave, *, publisher: Any) -> tuple[TriggerResult, str | None]:
        self.saves.append(save)
        status = TriggerStatus.QUEUED if self.published else TriggerStatus.PENDING
        return TriggerResult(status, "t-1", published=self.published), None if self.published else "nack"


def _send_keeper(queue: TriggerQueue, committer: RecordingCommitter, settings) -> TriggerResult:
    request = KeeperRequest(league_id="L1", team_id="7", keeper_player_id=4046)
    return send(queue, request, publisher=None, settings=settings, committer=committer)


@pytest.mark.parametrize("queue", trigger_queues(), ids=lambda q: q.name)
def test_every_declared_save_builder_resolves_to_a_function(queue):
    assert queue.save is not None and callable(queue.save_builder())


def test_only_the_draft_target_must_be_delivered():
    assert [q.name for q in trigger_queues() if q.must_deliver] == ["draft_targets"]


def test_a_save_that_does_not_name_module_and_function_is_refused_at_once():
    with pytest.raises(ValueError, match="save 'keeper_save' is not 'module:function'"):
        dataclasses.replace(KEEPER, save="keeper_save")


def test_a_fourth_queue_without_a_builder_sends_its_own_fields_and_may_stay_pending(keeper, settings):
    committer = RecordingCommitter(published=False)
    assert _send_keeper(keeper, committer, settings).status is TriggerStatus.PENDING
    [save] = committer.saves
    assert save.queue == "keeper_designations"
    assert save.body["keeper_player_id"] == 4046 and save.body["note"] is None


def test_a_fourth_queue_gets_its_save_builder_and_must_deliver_from_its_declaration(settings, monkeypatch):
    monkeypatch.setattr("publisher.triggers._refuse_if_dead", lambda _tracking_id: None)  # no database
    with registered(KEEPER_WITH_RULES) as queue:
        delivered = RecordingCommitter(published=True)
        assert _send_keeper(queue, delivered, settings).status is TriggerStatus.QUEUED
        assert delivered.saves[0].body["note"] == "by its builder"
        with pytest.raises(TriggerUnavailableError, match="not delivered"):
            _send_keeper(queue, RecordingCommitter(published=False), settings)


def test_the_help_texts_name_the_declared_queues(keeper):
    def help_of(*args: str) -> str:
        return " ".join(CliRunner().invoke(cli, [*args, "--help"]).output.split())

    declared = ", ".join(q.name for q in trigger_queues())
    assert declared.endswith("draft_targets, keeper_designations")
    assert f"The trigger queues: {declared}." in help_of("trigger")
    # outbox and amqp setup serve the queues declared at import (what `setup` declares)
    assert f"The activity outbox ({', '.join(TRIGGER_QUEUES)})." in help_of("outbox")
    assert f"Declare {', '.join(OUTBOX_QUEUES)} durable" in help_of("amqp", "setup")


# -- the fourth queue end to end: the CLI and the API publish what the contract says ----------


@pytest.fixture
def keeper_queue(keeper, publisher) -> TriggerQueue:
    """The fourth queue, and its RabbitMQ queue declared (as `kickoff amqp setup` does an outbox queue)."""
    publisher.declare_durable([keeper.name])
    yield keeper
    publisher.delete_queue(keeper.name)


def test_kickoff_trigger_keeper_publishes_a_message_the_contract_validates(keeper_queue, run, read_queue):
    from jsonschema import Draft7Validator, FormatChecker

    args = [
        "trigger",
        "keeper",
        "--league",
        "L1",
        "--team",
        "7",
        "--keeper",
        "4046",
        "--key",
        "k-1",
        "--json",
    ]
    code, out = run(*args)
    assert code == 0, out
    answer = json.loads(out)
    assert answer["status"] == "queued"
    [(body, props)] = read_queue("keeper_designations")
    assert props.delivery_mode == 2 and props.content_type == "application/json"
    assert body["tracking_id"] == answer["tracking_id"] and body["keeper_player_id"] == 4046
    doc = contract_with_keeper()
    Draft7Validator(
        {"$ref": "#/components/schemas/KeeperDesignation", "components": doc["components"]},
        format_checker=FormatChecker(),
    ).validate(body)
    assert json.loads(run(*args)[1])["status"] == "duplicate"  # the key holds for the declared TTL
    code, out = run("trigger", "keeper", "--league", "L1", "--team", "7", "--keeper", "DAL", "--json")
    assert code == 3 and json.loads(out)["field"] == "keeper_player_id"


def test_post_v1_trigger_keeper_enforces_its_declared_scope_and_publishes(
    keeper_queue, pub_settings, read_queue
):
    from fastapi.testclient import TestClient

    from api.keys import Scope, create_key

    keys = {scope: create_key(name=f"keeper-{scope.value}", scope=scope)[1] for scope in Scope}

    def bearer(scope: Scope) -> dict[str, str]:
        return {"Authorization": f"Bearer {keys[scope]}"}

    body = {"league_id": "L1", "team_id": "7", "keeper_player_id": 4046}
    api_settings = {**pub_settings.model_dump(), "api_allowed_hosts": "testserver"}
    app = create_app(MatchListenerEnvironment(_env_file=None, **api_settings))
    with TestClient(app) as client:
        refused = client.post(f"{ROUTE_PREFIX}/keeper", json=body, headers=bearer(Scope.TRIGGER))
        assert refused.status_code == 403 and "needs operator" in refused.json()["error"]
        bad = client.post(
            f"{ROUTE_PREFIX}/keeper",
            json={**body, "keeper_player_id": "4046"},
            headers=bearer(Scope.OPERATOR),
        )
        assert bad.status_code == 422 and bad.json()["field"] == "keeper_player_id"
        answer = client.post(f"{ROUTE_PREFIX}/keeper", json=body, headers=bearer(Scope.OPERATOR))
    assert answer.status_code == 202, answer.text
    [(sent, _)] = read_queue("keeper_designations")
    assert sent["tracking_id"] == answer.json()["tracking_id"] and sent["note"] is None
