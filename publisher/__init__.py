"""Publishing to RabbitMQ: queues, outbox, idempotency, triggers, trades, alerts, job runs, launcher."""
