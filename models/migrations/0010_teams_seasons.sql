-- depends: 0009_league_name_ci
-- League metadata, teams and seasons as the provider's league documents give them (hierarchy,
-- teams, seasons), kept current by the league refresh actors. Provider ids are unique per league
-- (the simulator derives team ids from aliases, which two sports may share).
ALTER TABLE leagues
    ADD COLUMN sr_id      TEXT,
    ADD COLUMN alias      TEXT,
    ADD COLUMN full_name  TEXT;

CREATE TABLE teams (
    id          SERIAL PRIMARY KEY,
    league_id   INTEGER NOT NULL REFERENCES leagues (id) ON DELETE CASCADE,
    sr_id       TEXT NOT NULL,
    name        TEXT NOT NULL,
    market      TEXT,
    alias       TEXT,
    conference  TEXT,
    division    TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (league_id, sr_id)
);

CREATE TABLE seasons (
    id          SERIAL PRIMARY KEY,
    league_id   INTEGER NOT NULL REFERENCES leagues (id) ON DELETE CASCADE,
    sr_id       TEXT NOT NULL,
    year        INTEGER NOT NULL,
    type        TEXT NOT NULL,
    status      TEXT,
    start_date  DATE,
    end_date    DATE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (league_id, sr_id)
);
-- "Which season is active today?" (the active-season schedule refresh).
CREATE INDEX seasons_league_start_idx ON seasons (league_id, start_date DESC);
