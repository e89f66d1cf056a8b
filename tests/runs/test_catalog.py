"""The job catalog: the shipped file loads; every kind of bad catalog is one CatalogError."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import CatalogError, ConfigurationError, InvalidRunParams, UnknownJob
from runs.catalog import Overlap, load_catalog, parse_catalog

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
                        "params": {"type": "object", "required": ["x"]},
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
