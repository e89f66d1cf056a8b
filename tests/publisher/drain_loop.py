"""The periodic outbox drain as its own process, for tests that cut a host's links under it.

``python -m tests.publisher.drain_loop`` reads the settings from the environment (DATABASE_URL and
AMQP_URL point at the test host's fault proxies) and runs ``drain_outbox_concurrently`` every
``DRAIN_LOOP_INTERVAL_SECONDS`` (default 0.5) until SIGTERM, as the worker's ``drain_outbox`` actor
does every minute. A failed run (PostgreSQL or RabbitMQ away) is logged and the next one tries
again. One line per run that published or failed something.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from config.settings import load_settings
from models.db import database, init_database
from publisher.drain import drain_outbox_concurrently

logger = logging.getLogger("drain_loop")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.CRITICAL)  # lines per failed connect otherwise
    settings = load_settings()
    init_database(
        settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    interval = float(os.environ.get("DRAIN_LOOP_INTERVAL_SECONDS", "0.5"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logger.info("drain loop started (every %ss)", interval)
    while not stop.is_set():
        try:
            report = drain_outbox_concurrently(settings=settings, max_seconds=10)
        except Exception as exc:  # the next run tries again, as the periodic actor would
            logger.warning("drain failed: %s: %s", type(exc).__name__, exc)
        else:
            if report.published or report.failed or report.broker_error:
                logger.info("drain: %s", report.as_json())
        finally:
            database.close()
        stop.wait(interval)
    logger.info("drain loop stopped")


if __name__ == "__main__":
    main()
