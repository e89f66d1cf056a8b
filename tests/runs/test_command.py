"""RunCommand is checked whole before the launcher uses it: ids, types, trigger, the job in the catalog."""

from __future__ import annotations

import json
import uuid

import pytest

from runs.catalog import parse_catalog
from runs.command import INVALID, NOT_JSON, UNKNOWN_JOB, RunCommand
from runs.errors import InvalidRunCommand

RUN_ID = str(uuid.uuid4())
GOOD = {
    "run_id": RUN_ID,
    "job": "noop",
    "attempt": 1,
    "trigger": "cli",
    "dedupe_key": RUN_ID,
    "parent_id": None,
}
CATALOG = parse_catalog({"jobs": {"noop": {"command": ["true"]}}})


def test_a_well_formed_command_round_trips():
    command = RunCommand.from_bytes(json.dumps(GOOD).encode())
    assert command.to_dict() == GOOD
    command.check_job(CATALOG)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"run_id": "not-a-uuid"}, "run_id 'not-a-uuid' is not a UUID"),
        ({"run_id": 42}, "run_id must be a non-empty string"),
        ({"parent_id": "nope"}, "parent_id 'nope' is not a UUID"),
        ({"attempt": "1"}, "attempt must be an integer from 1"),
        ({"attempt": True}, "attempt must be an integer from 1"),
        ({"attempt": 0}, "attempt must be an integer from 1"),
        ({"trigger": "scope"}, "trigger 'scope' is not one of"),
        ({"trigger": None}, "trigger must be a non-empty string"),
        ({"job": ""}, "job must be a non-empty string"),
        ({"dedupe_key": ["k"]}, "dedupe_key must be a non-empty string"),
    ],
)
def test_a_field_of_the_wrong_shape_is_an_invalid_command(change, says):
    with pytest.raises(InvalidRunCommand, match=says) as caught:
        RunCommand.from_dict({**GOOD, **change})
    assert caught.value.refusal == INVALID


@pytest.mark.parametrize("missing", ["run_id", "job", "attempt", "trigger", "dedupe_key"])
def test_a_missing_field_is_an_invalid_command(missing):
    body = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(InvalidRunCommand, match=missing) as caught:
        RunCommand.from_dict(body)
    assert caught.value.refusal == INVALID


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"null"])
def test_a_json_body_that_is_not_an_object_is_an_invalid_command(body):
    with pytest.raises(InvalidRunCommand, match="not an object") as caught:
        RunCommand.from_bytes(body)
    assert caught.value.refusal == INVALID


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe"])
def test_a_body_that_is_not_json_is_refused_as_not_json(body):
    with pytest.raises(InvalidRunCommand, match="not JSON") as caught:
        RunCommand.from_bytes(body)
    assert caught.value.refusal == NOT_JSON


def test_a_job_the_catalog_does_not_declare_is_refused_as_unknown_job():
    command = RunCommand.from_dict({**GOOD, "job": "gone"})
    with pytest.raises(InvalidRunCommand, match="no job 'gone'") as caught:
        command.check_job(CATALOG)
    assert caught.value.refusal == UNKNOWN_JOB
