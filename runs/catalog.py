"""The job catalog: which jobs exist, how to start them, and their run policies (loaded from YAML)."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import yaml
from croniter import croniter

from config.feed_text import unstorable_text
from runs.errors import CatalogError, InvalidRunParams, UnknownJob
from runs.param_rules import nonfinite_number, schema_problem

logger = logging.getLogger(__name__)

JOB_NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")

#: In a command, this item is replaced by the running interpreter (sys.executable).
PYTHON_PLACEHOLDER = "{python}"


class Overlap(StrEnum):
    """What the launcher does when a run starts while another run of the same job is running."""

    ALLOW = "allow"  # start it anyway
    FORBID = "forbid"  # end it skipped (overlap)


class JobScope(StrEnum):
    """Who may publish a job through the API (api.auth.COVERS ranks the keys' scopes)."""

    TRIGGER = "trigger"  # trigger, operator or admin keys
    OPERATOR = "operator"  # operator or admin keys: a job that changes consumers' data


#: A run's time limit when its job declares none (the catalog's ``default_time_limit_seconds``).
DEFAULT_TIME_LIMIT_SECONDS = 3600.0
#: The longest time limit a job may declare (one day).
MAX_TIME_LIMIT_SECONDS = 86_400.0


# The shape of the catalog file itself; each job's ``params`` is then checked as a JSON Schema.
CATALOG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["jobs"],
    "additionalProperties": False,
    "properties": {
        "default_time_limit_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIME_LIMIT_SECONDS,
        },
        "jobs": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["command"],
                "additionalProperties": False,
                "properties": {
                    "description": {"type": "string"},
                    "command": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                    "params": {"type": "object"},
                    "overlap": {"enum": [o.value for o in Overlap]},
                    "expires_after_seconds": {"type": "number", "exclusiveMinimum": 0},
                    "retries": {"type": "integer", "minimum": 0, "maximum": 10},
                    "time_limit_seconds": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_TIME_LIMIT_SECONDS,
                    },
                    "scope": {"enum": [s.value for s in JobScope]},
                    "schedule": {"type": "string"},
                    "debounce_seconds": {"type": "number", "exclusiveMinimum": 0},
                    "successors": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                },
            },
        },
    },
}

DEFAULT_PARAMS_SCHEMA: Mapping[str, Any] = MappingProxyType({"type": "object", "additionalProperties": False})


@dataclass(frozen=True)
class Job:
    """One catalog entry: how to start the job and the policies of its runs."""

    name: str
    command: tuple[str, ...]
    params_schema: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_PARAMS_SCHEMA)
    overlap: Overlap = Overlap.ALLOW
    expires_after_seconds: float = 3600.0
    retries: int = 0
    schedule: str | None = None
    debounce_seconds: float | None = None
    successors: tuple[str, ...] = ()
    description: str = ""
    time_limit_seconds: float = DEFAULT_TIME_LIMIT_SECONDS  # the launcher ends an attempt running longer
    scope: JobScope = JobScope.TRIGGER  # who may publish it through the API

    def argv(self) -> list[str]:
        """The command to execute, with ``{python}`` replaced by this interpreter."""
        return [sys.executable if part == PYTHON_PLACEHOLDER else part for part in self.command]

    def validate_params(self, params: Mapping[str, Any]) -> None:
        """Raise InvalidRunParams when ``params`` do not match this job's parameter schema."""
        if nonfinite_number(dict(params)):
            raise InvalidRunParams(f"job {self.name}: invalid params (params): numbers must be finite")
        unstorable = unstorable_text(dict(params))
        if unstorable:
            raise InvalidRunParams(f"job {self.name}: invalid params (params): {unstorable}")
        validator = jsonschema.Draft202012Validator(dict(self.params_schema))
        errors = sorted(validator.iter_errors(dict(params)), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path) or "params"
            raise InvalidRunParams(f"job {self.name}: invalid params ({where}): {first.message}")


@dataclass(frozen=True)
class Catalog:
    """Every job kickoff may run, by name; built by ``load_catalog`` and never mutated."""

    jobs: Mapping[str, Job] = field(default_factory=dict)
    source: str = "<memory>"

    def job(self, name: str) -> Job:
        """Return the job called ``name`` or raise UnknownJob."""
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise UnknownJob(f"no job {name!r} in the catalog (JOB_CATALOG_PATH; jobs: {known})") from None

    def scheduled(self) -> list[Job]:
        """The jobs that carry a cron schedule, by name."""
        return [job for _, job in sorted(self.jobs.items()) if job.schedule]


def _fail(source: str, message: str) -> CatalogError:
    return CatalogError(f"invalid job catalog {source}: {message}")


def parse_catalog(data: Any, *, source: str = "<memory>") -> Catalog:
    """Validate catalog ``data`` (the parsed YAML) and build a Catalog, or raise CatalogError."""
    errors = sorted(
        jsonschema.Draft202012Validator(CATALOG_SCHEMA).iter_errors(data), key=lambda e: list(e.path)
    )
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "top level"
        raise _fail(source, f"{where}: {first.message}")
    jobs: dict[str, Job] = {}
    default_limit = float(data.get("default_time_limit_seconds", DEFAULT_TIME_LIMIT_SECONDS))
    for name, spec in data["jobs"].items():
        if not JOB_NAME_RE.match(name):
            raise _fail(source, f"job name {name!r} must match {JOB_NAME_RE.pattern} (no '@')")
        params = spec.get("params", dict(DEFAULT_PARAMS_SCHEMA))
        try:
            jsonschema.Draft202012Validator.check_schema(params)
        except jsonschema.SchemaError as exc:
            raise _fail(source, f"jobs/{name}/params is not a JSON Schema: {exc.message}") from exc
        problem = schema_problem(params)
        if problem:
            raise _fail(source, f"jobs/{name}/{problem}")
        schedule = spec.get("schedule")
        if schedule is not None and not croniter.is_valid(schedule):
            raise _fail(source, f"jobs/{name}/schedule {schedule!r} is not a cron expression")
        jobs[name] = Job(
            name=name,
            command=tuple(spec["command"]),
            params_schema=MappingProxyType(params),
            overlap=Overlap(spec.get("overlap", Overlap.ALLOW.value)),
            expires_after_seconds=float(spec.get("expires_after_seconds", 3600.0)),
            retries=int(spec.get("retries", 0)),
            schedule=schedule,
            debounce_seconds=spec.get("debounce_seconds"),
            successors=tuple(spec.get("successors", ())),
            description=spec.get("description", ""),
            time_limit_seconds=float(spec.get("time_limit_seconds", default_limit)),
            scope=JobScope(spec.get("scope", JobScope.TRIGGER.value)),
        )
    for job in jobs.values():
        for successor in job.successors:
            if successor not in jobs:
                raise _fail(source, f"jobs/{job.name}/successors names unknown job {successor!r}")
        if job.schedule:
            try:
                job.validate_params({})
            except InvalidRunParams as exc:
                raise _fail(source, f"scheduled job {job.name} must accept empty params: {exc}") from exc
    return Catalog(jobs=MappingProxyType(jobs), source=source)


def load_catalog(path: Path | str) -> Catalog:
    """Read and validate the YAML catalog at ``path``; any problem is one CatalogError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(str(path), f"cannot read it: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _fail(str(path), f"not valid YAML: {str(exc).splitlines()[0]}") from exc
    catalog = parse_catalog(data, source=str(path))
    logger.debug("loaded job catalog %s: %s jobs", path, len(catalog.jobs))
    return catalog
