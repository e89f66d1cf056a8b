"""The job catalog: the shipped file loads; every kind of bad catalog is one CatalogError."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigurationError
from runs.catalog import Overlap, load_catalog, parse_catalog
from runs.errors import CatalogError, InvalidRunParams, UnknownJob

GOOD_JOB = {"command": ["{python}", "-m", "runs.jobs.noop"]}


def test_the_shipped_catalog_loads_with_its_example_jobs(catalog):
    assert {"noop", "sleep", "fail", "flaky", "chain_extract", "scoped", "heartbeat", "sync_players"} <= set(
        catalog.jobs
    )
    assert catalog.job("sleep_exclusive").overlap is Overlap.FORBID
    assert catalog.job("flaky").retries == 2
    assert catalog.job("chain_extract").successors == ("chain_transform",)
    assert [job.name for job in catalog.scheduled()] == ["heartbeat"]


def test_python_placeholder_becomes_the_running_interpreter(catalog):
    import sys

    assert catalog.job("noop").argv() == [sys.executable, "-m", "runs.jobs.noop"]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        pytest.param(None, "top level", id="empty-file"),
        pytest.param({"jobs": {}}, "jobs", id="no-jobs"),
        pytest.param({"jobs": {"a": {}}}, "command", id="missing-command"),
        pytest.param({"jobs": {"a": {**GOOD_JOB, "overlap": "sometimes"}}}, "overlap", id="bad-overlap"),
        pytest.param({"jobs": {"a": {**GOOD_JOB, "retries": -1}}}, "retries", id="negative-retries"),
        pytest.param({"jobs": {"a": {**GOOD_JOB, "colour": "red"}}}, "colour", id="unknown-key"),
        pytest.param(
            {"jobs": {"a": {**GOOD_JOB, "params": {"type": 12}}}}, "JSON Schema", id="bad-params-schema"
        ),
        pytest.param({"jobs": {"a": {**GOOD_JOB, "schedule": "every day"}}}, "cron", id="bad-cron"),
        pytest.param(
            {"jobs": {"a": {**GOOD_JOB, "successors": ["b"]}}}, "unknown job 'b'", id="unknown-successor"
        ),
        pytest.param({"jobs": {"a@b": GOOD_JOB}}, "no '@'", id="at-sign-in-name"),
        pytest.param(
            {
                "jobs": {
                    "a": {
                        **GOOD_JOB,
                        "schedule": "0 * * * *",
                        "params": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["x"],
                            "properties": {"x": {"type": "boolean"}},
                        },
                    }
                }
            },
            "must accept empty params",
            id="scheduled-job-needing-params",
        ),
    ],
)
def test_a_bad_catalog_is_one_clear_catalog_error(data, fragment):
    with pytest.raises(CatalogError) as info:
        parse_catalog(data, source="test.yaml")
    message = str(info.value)
    assert message.startswith("invalid job catalog test.yaml: ")
    assert fragment in message
    assert "\n" not in message
    assert isinstance(info.value, ConfigurationError)


def test_a_catalog_file_that_is_not_yaml_is_a_catalog_error(tmp_path: Path):
    path = tmp_path / "catalog.yaml"
    path.write_text("jobs: [unclosed\n")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_catalog(path)


def test_a_missing_catalog_file_is_a_catalog_error(tmp_path: Path):
    with pytest.raises(CatalogError, match="cannot read it"):
        load_catalog(tmp_path / "nope.yaml")


def test_params_are_validated_against_the_jobs_schema(catalog):
    catalog.job("sleep").validate_params({"seconds": 1})
    with pytest.raises(InvalidRunParams, match="seconds"):
        catalog.job("sleep").validate_params({})
    with pytest.raises(InvalidRunParams):
        catalog.job("noop").validate_params({"seconds": "soon"})
    with pytest.raises(InvalidRunParams):
        catalog.job("heartbeat").validate_params({"anything": 1})


def test_an_unknown_job_names_the_known_ones(catalog):
    with pytest.raises(UnknownJob, match="noop"):
        catalog.job("nope")


NUMBER = {"type": "number", "minimum": 0, "maximum": 10}
NAME = {"type": "string", "maxLength": 40, "pattern": "^[a-z]+$"}


def _job_with(properties: dict) -> dict:
    return {
        "jobs": {
            "a": {
                **GOOD_JOB,
                "params": {"type": "object", "additionalProperties": False, "properties": properties},
            }
        }
    }


@pytest.mark.parametrize(
    ("properties", "fragment"),
    [
        pytest.param(
            {"source": {"type": "string", "maxLength": 9, "pattern": "^a$"}}, "names a place", id="source"
        ),
        pytest.param({"trace_dir": NAME}, "names a place", id="trace-dir"),
        pytest.param({"feed_url": NAME}, "names a place", id="url"),
        pytest.param({"seconds": {"type": "number", "minimum": 0}}, "minimum and a maximum", id="no-maximum"),
        pytest.param({"count": {"type": "integer", "maximum": 9}}, "minimum and a maximum", id="no-minimum"),
        pytest.param({"label": {"type": "string", "pattern": "^a$"}}, "maxLength", id="unbounded-string"),
        pytest.param({"label": {"type": "string", "maxLength": 9}}, "pattern", id="string-without-pattern"),
        pytest.param({"label": {**NAME, "pattern": "^[a-z/]+$"}}, "'/etc/passwd'", id="pattern-takes-a-path"),
        pytest.param({"label": {**NAME, "pattern": "."}}, "accepts", id="pattern-takes-a-url"),
        pytest.param({"steps": {"type": "array", "items": NAME}}, "maxItems", id="unbounded-array"),
        pytest.param(
            {"steps": {"type": "array", "maxItems": 3, "items": {"type": "string"}}},
            "maxLength",
            id="array-of-free-text",
        ),
        pytest.param(
            {"opts": {"type": "object", "properties": {}}}, "additionalProperties", id="open-object"
        ),
        pytest.param({"anything": {}}, "one type", id="untyped"),
    ],
)
def test_a_job_whose_params_can_name_a_place_or_are_unbounded_is_refused_at_load(properties, fragment):
    with pytest.raises(CatalogError) as info:
        parse_catalog(_job_with(properties), source="test.yaml")
    assert fragment in str(info.value)


def test_bounded_params_without_places_load_and_an_enum_may_name_fixed_sources():
    data = _job_with({"seconds": NUMBER, "label": NAME, "source": {"enum": ["primary", "backup"]}})
    job = parse_catalog(data).job("a")
    job.validate_params({"seconds": 3, "label": "abc", "source": "backup"})


def test_an_open_params_object_is_refused_at_load():
    data = {"jobs": {"a": {**GOOD_JOB, "params": {"type": "object"}}}}
    with pytest.raises(CatalogError, match="additionalProperties"):
        parse_catalog(data)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_number_that_is_not_finite_is_refused(catalog, value):
    with pytest.raises(InvalidRunParams, match="finite"):
        catalog.job("sleep").validate_params({"seconds": value})


def test_every_shipped_job_has_a_time_limit_and_sync_players_needs_an_operator(catalog):
    assert all(0 < job.time_limit_seconds <= 86_400 for job in catalog.jobs.values())
    assert catalog.job("sync_players").scope == "operator"
    assert catalog.job("sync_players").time_limit_seconds == 600
    assert catalog.job("noop").scope == "trigger"
    with pytest.raises(InvalidRunParams):
        catalog.job("sync_players").validate_params({"source": "http://127.0.0.1:1/latest/meta-data/"})
    with pytest.raises(InvalidRunParams):
        catalog.job("noop").validate_params({"trace_dir": "/tmp"})
    with pytest.raises(InvalidRunParams, match="seconds"):
        catalog.job("sleep").validate_params({"seconds": 601})


def test_the_catalogs_default_time_limit_applies_to_a_job_without_its_own():
    data = {
        "default_time_limit_seconds": 42,
        "jobs": {"a": GOOD_JOB, "b": {**GOOD_JOB, "time_limit_seconds": 7}},
    }
    catalog = parse_catalog(data)
    assert (catalog.job("a").time_limit_seconds, catalog.job("b").time_limit_seconds) == (42, 7)
    with pytest.raises(CatalogError, match="time_limit_seconds"):
        parse_catalog({"jobs": {"a": {**GOOD_JOB, "time_limit_seconds": 10**6}}})
