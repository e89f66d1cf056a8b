from __future__ import annotations

import threading

import pytest

from config.errors import ConfigurationError
from listener.pipeline import QuestionPipeline, load_pipeline


@pytest.mark.parametrize(
    "dotted", ["listener.pipeline:QuestionPipeline", "listener.pipeline.QuestionPipeline"]
)
def test_the_pipeline_setting_names_its_class_with_a_colon_or_a_dot(dotted):
    pipeline = load_pipeline(dotted, match_id="m1", settings=None, db_gate=threading.Semaphore())
    assert isinstance(pipeline, QuestionPipeline)
    assert pipeline.match_id == "m1"


@pytest.mark.parametrize("dotted", ["no_such_module:Pipeline", "listener.pipeline:NoSuchClass", "", "a b"])
def test_a_pipeline_that_cannot_be_imported_is_a_configuration_error_naming_it(dotted):
    with pytest.raises(ConfigurationError, match=f"listener_pipeline {dotted!r} cannot be imported"):
        load_pipeline(dotted, match_id="m1", settings=None, db_gate=threading.Semaphore())
