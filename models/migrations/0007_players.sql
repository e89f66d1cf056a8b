-- depends: 0006_outbox_tries
-- Player sync: the provider's players map (Sleeper ids, with the ESPN id where the map has one)
-- and the rostered players whose injury status changes are alerted on waiver_actions.
CREATE TABLE players (
    sleeper_id     TEXT PRIMARY KEY,
    espn_id        BIGINT,
    full_name      TEXT,
    team           TEXT,
    injury_status  TEXT,
    synced_at      TIMESTAMPTZ NOT NULL
);
-- "Is this id an ESPN id?" on the trigger routes.
CREATE INDEX players_espn_id_idx ON players (espn_id) WHERE espn_id IS NOT NULL;

CREATE TABLE roster_players (
    league_id   TEXT NOT NULL,
    sleeper_id  TEXT NOT NULL,
    added_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (league_id, sleeper_id)
);
CREATE INDEX roster_players_sleeper_idx ON roster_players (sleeper_id);
