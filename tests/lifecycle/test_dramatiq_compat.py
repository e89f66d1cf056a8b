"""The broker internals kickoff uses (batch enqueue, RabbitMQ consumer) are checked at import; the error
names the version."""

from __future__ import annotations

import dramatiq
import pytest
from dramatiq.brokers import rabbitmq as rabbitmq_broker
from dramatiq.brokers import redis as redis_broker
from dramatiq.brokers.redis import RedisBroker

from actors import dramatiq_compat


def test_the_installed_dramatiq_has_what_the_batch_enqueue_uses():
    dramatiq_compat._check()


def test_a_dramatiq_without_the_maintenance_hook_fails_naming_its_version(monkeypatch):
    monkeypatch.delattr(RedisBroker, "_should_do_maintenance")
    with pytest.raises(
        ImportError, match=rf"dramatiq {dramatiq.__version__} .*RedisBroker\._should_do_maintenance"
    ):
        dramatiq_compat._check()


def test_a_dispatch_script_with_another_argument_order_fails_at_the_check(monkeypatch):
    lua = redis_broker._scripts["dispatch"].decode()
    swapped = lua.replace("local worker_id = ARGV[4]", "local worker_id = ARGV[5]")
    monkeypatch.setitem(redis_broker._scripts, "dispatch", swapped.encode())
    with pytest.raises(ImportError, match=r"ARGV\[4\] = worker_id"):
        dramatiq_compat._check()


def test_a_rabbitmq_consumer_without_delivery_tags_fails_at_the_check(monkeypatch):
    class Renamed(rabbitmq_broker._RabbitmqConsumer):
        def ack(self, message):  # acks by another attribute than the delivery tag
            return None

    monkeypatch.setattr(rabbitmq_broker, "_RabbitmqConsumer", Renamed)
    with pytest.raises(ImportError, match=r"_RabbitmqConsumer\.ack: message\._tag"):
        dramatiq_compat._check()


def test_a_rabbitmq_broker_without_consumer_class_fails_at_the_check(monkeypatch):
    monkeypatch.delattr(rabbitmq_broker.RabbitmqBroker, "consumer_class")
    with pytest.raises(
        ImportError, match=rf"dramatiq {dramatiq.__version__} .*RabbitmqBroker\.consumer_class"
    ):
        dramatiq_compat._check()


def test_a_dramatiq_whose_message_has_other_fields_fails_at_the_check(monkeypatch):
    monkeypatch.setattr(dramatiq_compat, "_MESSAGE_FIELDS", ("queue_name", "actor_name"))
    with pytest.raises(ImportError, match="Message fields"):
        dramatiq_compat._check()


def test_a_message_is_encoded_to_the_same_bytes_as_dramatiq_encodes_it():
    message = dramatiq.Message(
        queue_name="match_listeners",
        actor_name="start_match_listener",
        args=(),
        kwargs={"match_id": "m", "overrides": {"title": 'Zürich "derby"'}, "force": False},
        options={"redis_message_id": "r.1"},
        message_id="start-match-listener.m.u",
    )
    copied = dramatiq_compat.with_options(message, redis_message_id="r.2")

    assert dramatiq_compat.encode(message) == message.encode()
    assert copied == message.copy(options={"redis_message_id": "r.2"})


def test_another_global_encoder_encodes_the_message_itself(monkeypatch):
    from dramatiq.encoder import PickleEncoder

    message = dramatiq.Message(queue_name="q", actor_name="a", args=(1,), kwargs={}, options={})
    monkeypatch.setattr(dramatiq.message, "global_encoder", PickleEncoder())

    assert dramatiq_compat.encode(message) == message.encode()
    assert dramatiq.Message.decode(dramatiq_compat.encode(message)) == message
