-- depends: 0015_console_session_idle
-- Gapless listeners. Each lifecycle row counts its gaps (reconnects, takeovers, stream silences
-- longer than two provider heartbeat intervals): how many, the seconds without a stream, the
-- events backfilled from the play-by-play or a resume replay, the gaps whose backfill never
-- succeeded during the run, and the events the verification at close found still missing.
ALTER TABLE match_listener_records
    ADD COLUMN gaps INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN gap_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
    ADD COLUMN events_backfilled INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN gaps_unrecovered INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN events_unrecovered INTEGER NOT NULL DEFAULT 0;

-- The last comparison of the match's archive with the provider's play-by-play (verify-archive,
-- run by hand or when the match closes): when, and {"ok", "missing", "extra", "differing", "events"}
-- with the three lists cut to their first 100 ids and their full counts beside them.
ALTER TABLE matches
    ADD COLUMN archive_verified_at TIMESTAMPTZ,
    ADD COLUMN archive_verification JSONB;
