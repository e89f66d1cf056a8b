"""RunCommand: the JSON message publish_run sends to job_runs for one attempt of one run."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.records import json_fields
from models.run_log import Trigger
from publisher.queues import JOB_RUNS
from runs.errors import InvalidRunCommand, UnknownJob

if TYPE_CHECKING:
    from runs.catalog import Catalog

#: The kinds of refusal (the x-kickoff-kind header of a delivery set aside on job_runs.XQ).
NOT_JSON = "not_json"  # the body does not decode as UTF-8 JSON
INVALID = "invalid"  # a field is missing, of the wrong type, or not a UUID / trigger / attempt
UNKNOWN_JOB = "unknown_job"  # the job is not in this launcher's catalog
ERROR = "error"  # handling it raised an unexpected error (logged with its traceback)

#: Where the launcher sets aside job_runs deliveries it cannot handle (the ``{queue}.XQ``
#: dead-letter naming of kickoff's Dramatiq queues), each with its reason in x-kickoff-reason.
REJECTED_QUEUE = f"{JOB_RUNS}.XQ"

#: Triggers a RunCommand may carry (scope runs are recorded by run_scope, never published).
COMMAND_TRIGGERS: tuple[str, ...] = tuple(t.value for t in Trigger if t is not Trigger.SCOPE)


def _invalid(message: str) -> InvalidRunCommand:
    return InvalidRunCommand(f"not a RunCommand: {message}", refusal=INVALID)


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise _invalid(f"{name} must be a non-empty string, got {value!r}")
    return value


def _uuid(data: dict[str, Any], name: str) -> str:
    value = _text(data, name)
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise _invalid(f"{name} {value!r} is not a UUID") from None


@dataclass(frozen=True)
class RunCommand:
    """Start attempt ``attempt`` of run ``run_id`` of ``job`` (the run_log row holds the rest)."""

    run_id: str
    job: str
    attempt: int
    trigger: str
    dedupe_key: str
    parent_id: str | None = None

    @property
    def message_id(self) -> str:
        """The AMQP message id: one per run attempt, so a consumer can spot a redelivery."""
        return f"{self.run_id}:{self.attempt}"

    to_dict = json_fields

    @classmethod
    def from_dict(cls, data: Any) -> RunCommand:
        """Build a RunCommand from a decoded body checked whole, or raise InvalidRunCommand.

        Nothing is coerced: the ids must be UUID strings, ``attempt`` an integer from 1,
        ``trigger`` a Trigger value, ``job`` and ``dedupe_key`` non-empty strings.
        """
        if not isinstance(data, dict):
            raise _invalid(f"the body is a JSON {type(data).__name__}, not an object")
        attempt = data.get("attempt")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            raise _invalid(f"attempt must be an integer from 1, got {attempt!r}")
        trigger = _text(data, "trigger")
        if trigger not in COMMAND_TRIGGERS:
            raise _invalid(f"trigger {trigger!r} is not one of {', '.join(COMMAND_TRIGGERS)}")
        return cls(
            run_id=_uuid(data, "run_id"),
            job=_text(data, "job"),
            attempt=attempt,
            trigger=trigger,
            dedupe_key=_text(data, "dedupe_key"),
            parent_id=None if data.get("parent_id") is None else _uuid(data, "parent_id"),
        )

    @classmethod
    def from_bytes(cls, body: bytes) -> RunCommand:
        """Decode a job_runs delivery body, or raise InvalidRunCommand."""
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidRunCommand(f"job_runs body is not JSON: {exc}", refusal=NOT_JSON) from exc
        return cls.from_dict(data)

    def check_job(self, catalog: Catalog) -> None:
        """Raise InvalidRunCommand (kind unknown_job) unless ``catalog`` declares the command's job."""
        try:
            catalog.job(self.job)
        except UnknownJob as exc:
            raise InvalidRunCommand(str(exc), refusal=UNKNOWN_JOB) from exc
