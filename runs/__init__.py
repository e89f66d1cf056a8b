"""Job runs: the catalog, publish_run and the run outbox, the launcher, run_scope.

Runs reach the launcher over RabbitMQ through the publisher's AMQP transport (``publisher.amqp``);
their state is the ``run_log`` table (``models.run_log``).
"""
