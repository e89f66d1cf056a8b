"""The sync_players catalog job: one player sync (players.sync) of PLAYERS_SOURCE (settings only)."""

from __future__ import annotations

import json
import sys

from config.errors import KickoffError
from config.settings import load_settings, mask_url, mask_urls_in
from models.db import init_database
from models.leagues import PLAYERS
from players.sync import sync_players
from publisher.amqp import publisher_from_settings


def main() -> int:
    settings = load_settings()
    init_database(
        settings.database_url,
        connect_timeout_seconds=settings.database_connect_timeout_seconds,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
    )
    source = settings.players_source.format(base_url=settings.sportradar_base_url, league=PLAYERS.name)
    try:
        with publisher_from_settings(settings) as publisher:
            report = sync_players(source, publisher=publisher)
    except KickoffError as exc:
        print(f"player sync failed: {mask_urls_in(str(exc))}", file=sys.stderr)
        return 1
    print(json.dumps({"source": mask_url(source), **report.as_json()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
