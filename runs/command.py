"""RunCommand: the JSON message publish_run sends to job_runs for one attempt of one run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from config.errors import InvalidRunCommand
from config.records import json_fields


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
        """Build a RunCommand from a decoded body, or raise InvalidRunCommand."""
        try:
            return cls(
                run_id=str(data["run_id"]),
                job=str(data["job"]),
                attempt=int(data["attempt"]),
                trigger=str(data["trigger"]),
                dedupe_key=str(data["dedupe_key"]),
                parent_id=None if data.get("parent_id") is None else str(data["parent_id"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidRunCommand(f"not a RunCommand: {exc!r}") from exc

    @classmethod
    def from_bytes(cls, body: bytes) -> RunCommand:
        """Decode a job_runs delivery body, or raise InvalidRunCommand."""
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidRunCommand(f"job_runs body is not JSON: {exc}") from exc
        return cls.from_dict(data)
