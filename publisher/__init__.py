"""Activity publishing to RabbitMQ: queues, outbox, idempotency, triggers, trades, alerts, AMQP transport."""
