-- Foundation: leagues, matches, questions, match listener lifecycle rows.

CREATE TABLE leagues (
    id          SERIAL PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    enabled     BOOLEAN NOT NULL DEFAULT TRUE
);

CREATE TABLE matches (
    id                      UUID PRIMARY KEY,
    sr_id                   TEXT NOT NULL UNIQUE,
    league_id               INTEGER NOT NULL REFERENCES leagues (id) ON DELETE CASCADE,
    title                   TEXT,
    scheduled               TIMESTAMPTZ NOT NULL,
    status                  TEXT NOT NULL DEFAULT 'scheduled',
    is_test                 BOOLEAN NOT NULL DEFAULT FALSE,
    auto_dispatch_listener  BOOLEAN NOT NULL DEFAULT TRUE,
    listener_start_settings JSONB NOT NULL DEFAULT '{}'::jsonb,
    sr_status               TEXT,
    refreshed_at            TIMESTAMPTZ,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The dispatch query: auto-dispatched matches by status, pre-game ones by start time.
-- Partial, so its size follows dispatchable matches, not the whole table.
CREATE INDEX matches_dispatch_idx ON matches (status, scheduled)
    WHERE auto_dispatch_listener
      AND status IN ('inprogress', 'halftime', 'scheduled', 'created', 'time-tbd',
                     'delayed', 'wdelay', 'fdelay', 'odelay', 'suspended');
CREATE INDEX matches_league_idx ON matches (league_id);

CREATE TABLE questions (
    id          UUID PRIMARY KEY,
    match_id    UUID NOT NULL REFERENCES matches (id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    in_game     BOOLEAN NOT NULL DEFAULT TRUE,
    status      TEXT NOT NULL DEFAULT 'open',
    answer      TEXT,
    details     JSONB NOT NULL DEFAULT '{}'::jsonb,
    issued_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at  TIMESTAMPTZ
);
CREATE UNIQUE INDEX questions_match_key_idx ON questions (match_id, key);

CREATE TABLE match_listener_records (
    id            UUID PRIMARY KEY,
    match_id      UUID NOT NULL REFERENCES matches (id) ON DELETE CASCADE,
    message_id    TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at      TIMESTAMPTZ,
    exit_code     INTEGER,
    exit_reason   TEXT,
    stopped_by    TEXT,
    host          TEXT,
    pid           INTEGER,
    dry_run       BOOLEAN NOT NULL DEFAULT FALSE
);
-- "Open row of this match" (dispatch, start guard, sweeper).
CREATE INDEX match_listener_records_open_idx ON match_listener_records (match_id, created_at)
    WHERE ended_at IS NULL;
-- History per match (status board).
CREATE INDEX match_listener_records_match_idx ON match_listener_records (match_id, created_at DESC);
