-- depends: 0016_gapless_archive
-- The operator's record: one append-only row per state-changing act (CLI, API, console), who did it
-- (an API key's id and name, or the CLI's "os_user@host"), what, on what, why, the values before
-- and after, and the request id. A trigger refuses UPDATE and DELETE unless the retention job set
-- `SET LOCAL kickoff.audit_retention = 'on'` in its own transaction (prune_audit_log).
CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT now(),
    who_key_id TEXT,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_id TEXT,
    reason TEXT,
    before JSONB,
    after JSONB,
    request_id TEXT
);

CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_who_at_idx ON audit_log (who, at);
CREATE INDEX audit_log_action_at_idx ON audit_log (action, at);
CREATE INDEX audit_log_target_at_idx ON audit_log (target_kind, target_id, at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('kickoff.audit_retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Delete the entries older than `days` days (the retention job); returns how many went.
CREATE FUNCTION prune_audit_log(days INTEGER) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    n BIGINT;
BEGIN
    PERFORM set_config('kickoff.audit_retention', 'on', true);
    DELETE FROM audit_log WHERE at < now() - make_interval(days => days);
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('kickoff.audit_retention', 'off', true);
    RETURN n;
END;
$$;
