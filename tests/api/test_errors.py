"""The one mapping from the exception tree to HTTP status codes."""

from __future__ import annotations

import pytest

from api.errors import error_body, status_of
from config.errors import DatabaseUnavailable, KickoffError, RedisUnavailable
from lifecycle.errors import ListenerStartSettingsError
from models.errors import MatchNotFound
from publisher.errors import (
    BrokerConnectionError,
    PublishNackedError,
    TradeError,
    TradeNotFound,
    TriggerConflictError,
    TriggerUnavailableError,
    TriggerValidationError,
)
from runs.errors import CatalogError, InvalidRunParams, RunNotFound, UnknownJob


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (TriggerValidationError("swaps[0].player_id", "an ESPN id"), 422),
        (InvalidRunParams("bad"), 422),
        (UnknownJob("no job"), 422),
        (ListenerStartSettingsError("bad override"), 422),
        (TriggerConflictError("filled"), 409),
        (TradeError("not failed"), 409),
        (TriggerUnavailableError("retry", tracking_id="t"), 503),
        (DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="x", reason="r"), 503),
        (RedisUnavailable(service="Redis", setting="REDIS_URL", address="x", reason="r"), 503),
        (BrokerConnectionError(service="RabbitMQ", setting="AMQP_URL", address="x", reason="r"), 503),
        (PublishNackedError("nack"), 503),
        (MatchNotFound("no match"), 404),
        (RunNotFound("no run"), 404),
        (TradeNotFound("no claim"), 404),
        (CatalogError("bad catalog"), 500),
        (KickoffError("anything else"), 500),
    ],
)
def test_status_of(exc, status):
    assert status_of(exc) == status


def test_bodies_name_the_field_and_the_tracking_id():
    assert error_body(TriggerValidationError("bid", "an integer")) == {
        "error": "bid: an integer",
        "field": "bid",
    }
    assert error_body(UnknownJob("no job x"))["field"] == "job"
    unavailable = error_body(TriggerUnavailableError("saved, not delivered", tracking_id="t-1"))
    assert unavailable == {"error": "saved, not delivered", "tracking_id": "t-1", "retryable": True}
