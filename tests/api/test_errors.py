"""The one mapping from the exception tree to HTTP status codes."""

from __future__ import annotations

import pytest

from api.errors import error_body, status_of
from config import errors as e


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (e.TriggerValidationError("swaps[0].player_id", "an ESPN id"), 422),
        (e.InvalidRunParams("bad"), 422),
        (e.UnknownJob("no job"), 422),
        (e.ListenerStartSettingsError("bad override"), 422),
        (e.TriggerConflictError("filled"), 409),
        (e.TradeError("not failed"), 409),
        (e.TriggerUnavailableError("retry", tracking_id="t"), 503),
        (e.DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="x", reason="r"), 503),
        (e.RedisUnavailable(service="Redis", setting="REDIS_URL", address="x", reason="r"), 503),
        (e.BrokerConnectionError(service="RabbitMQ", setting="AMQP_URL", address="x", reason="r"), 503),
        (e.PublishNackedError("nack"), 503),
        (e.MatchNotFound("no match"), 404),
        (e.RunNotFound("no run"), 404),
        (e.TradeNotFound("no claim"), 404),
        (e.CatalogError("bad catalog"), 500),
        (e.KickoffError("anything else"), 500),
    ],
)
def test_status_of(exc, status):
    assert status_of(exc) == status


def test_bodies_name_the_field_and_the_tracking_id():
    assert error_body(e.TriggerValidationError("bid", "an integer")) == {
        "error": "bid: an integer",
        "field": "bid",
    }
    assert error_body(e.UnknownJob("no job x"))["field"] == "job"
    unavailable = error_body(e.TriggerUnavailableError("saved, not delivered", tracking_id="t-1"))
    assert unavailable == {"error": "saved, not delivered", "tracking_id": "t-1", "retryable": True}
