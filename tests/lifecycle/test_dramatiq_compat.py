"""The three Dramatiq internals kickoff still uses are checked at import; the error names the version."""

from __future__ import annotations

import dramatiq
import pytest
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker

from actors import dramatiq_compat


def test_the_installed_dramatiq_has_what_kickoff_uses():
    assert dramatiq_compat._check() == []
    dramatiq_compat.check()


def test_each_internal_names_its_upstream_issue():
    assert set(dramatiq_compat.UPSTREAM) == {"RedisBroker enqueue", "_build_queue_arguments", "_tag"}
    assert all(
        url.startswith("https://github.com/Bogdanp/dramatiq/") for url in dramatiq_compat.UPSTREAM.values()
    )


def test_a_rabbitmq_broker_without_queue_arguments_fails_naming_its_version(monkeypatch):
    monkeypatch.delattr(RabbitmqBroker, "_build_queue_arguments")
    with pytest.raises(
        ImportError, match=rf"dramatiq {dramatiq.__version__} .*RabbitmqBroker\._build_queue_arguments"
    ):
        dramatiq_compat.check()


def test_a_redis_broker_that_stores_messages_under_another_id_fails_at_the_check(monkeypatch):
    def enqueue(self, message, *, delay=None):  # enqueues without the redis_message_id option
        return message

    monkeypatch.setattr(RedisBroker, "enqueue", enqueue)
    with pytest.raises(ImportError, match=rf"dramatiq {dramatiq.__version__} .*RedisBroker\.enqueue"):
        dramatiq_compat.check()


def test_a_redis_broker_without_its_named_scripts_fails_at_the_check(monkeypatch):
    monkeypatch.setattr(dramatiq_compat, "_source", lambda function: "")
    with pytest.raises(ImportError, match=r"RedisBroker: self\.scripts\[\"dispatch\"\]"):
        dramatiq_compat.check()


def test_store_messages_queues_one_hset_and_one_rpush_in_order():
    class Pipe:
        def __init__(self):
            self.calls = []

        def hset(self, key, *, mapping):
            self.calls.append(("hset", key, list(mapping)))

        def rpush(self, key, *ids):
            self.calls.append(("rpush", key, list(ids)))

    broker = type("Broker", (), {"namespace": "dramatiq"})()
    messages = [
        dramatiq_compat.with_redis_message_id(dramatiq.Message("q", "a", (n,), {}, {}), f"b.{n}")
        for n in (1, 2)
    ]
    pipe = Pipe()
    dramatiq_compat.store_messages(pipe, broker, "q", messages)

    assert pipe.calls == [
        ("hset", "dramatiq:q.msgs", ["b.1", "b.2"]),
        ("rpush", "dramatiq:q", ["b.1", "b.2"]),
    ]
    assert all(m.options["redis_message_id"].startswith("b.") for m in messages)


def test_a_rabbitmq_consumer_that_acks_without_the_delivery_tag_fails_at_the_check(monkeypatch):
    class Renamed(dramatiq_compat.RabbitmqConsumer):  # type: ignore[misc, valid-type]
        def ack(self, message):  # acks by another attribute than the delivery tag
            return None

    monkeypatch.setattr(RabbitmqBroker, "consumer_class", property(lambda self: Renamed))
    with pytest.raises(ImportError, match=r"the RabbitMQ consumer's ack: message\._tag"):
        dramatiq_compat.check()


def test_the_consumer_class_is_the_one_the_broker_property_returns():
    assert dramatiq_compat.RabbitmqConsumer.__name__.endswith("RabbitmqConsumer")
    assert callable(dramatiq_compat.RabbitmqConsumer.ack)


def test_queue_arguments_extend_the_brokers_own():
    class Base:
        def _build_queue_arguments(self, queue_name):
            return {"x-dead-letter-routing-key": f"{queue_name}.XQ"}

    class Broker(dramatiq_compat.QueueArgumentsHook, Base):
        def queue_arguments(self, queue_name, arguments):
            return {**arguments, "x-queue-type": "quorum"}

    assert Broker()._build_queue_arguments("q") == {
        "x-dead-letter-routing-key": "q.XQ",
        "x-queue-type": "quorum",
    }


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
