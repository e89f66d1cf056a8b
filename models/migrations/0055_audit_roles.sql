-- depends: 0045_trace_context
-- The audit log against the app itself (issue 35): the app's role may only INSERT and SELECT it
-- (`kickoff db migrate` grants that, models/roles.py); TRUNCATE is refused by a trigger too; the
-- retention bypass of the append-only trigger holds only for the table's owner (the setting alone
-- lets nothing through); retention is prune_audit_log(days, who), a SECURITY DEFINER function of
-- the owner, EXECUTE revoked from PUBLIC, refusing fewer days than the floor in audit_policy
-- (AUDIT_RETENTION_DAYS, written by `kickoff db migrate`) and recording each prune as an entry.
CREATE TABLE audit_policy (
    singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    retention_floor_days INTEGER NOT NULL CHECK (retention_floor_days >= 1)
);
INSERT INTO audit_policy (retention_floor_days) VALUES (400);

CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('kickoff.audit_retention', true) = 'on'
        AND current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

DROP FUNCTION prune_audit_log(INTEGER);

-- Delete the entries older than `days` days (at least the floor) and record the prune; returns how many went.
CREATE FUNCTION prune_audit_log(days INTEGER, who TEXT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    n BIGINT;
    floor_days INTEGER;
BEGIN
    SELECT retention_floor_days INTO floor_days FROM public.audit_policy;
    IF floor_days IS NULL OR days IS NULL OR days < floor_days THEN
        RAISE EXCEPTION 'audit retention: % days is below the floor of % days (AUDIT_RETENTION_DAYS)',
            days, floor_days USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('kickoff.audit_retention', 'on', true);
    DELETE FROM public.audit_log WHERE at < now() - make_interval(days => days);
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('kickoff.audit_retention', 'off', true);
    INSERT INTO public.audit_log (who, action, target_kind, target_id, after)
        VALUES (coalesce(who, 'retention'), 'audit.prune', 'audit_log', NULL,
                jsonb_build_object('days', days, 'deleted', n));
    RETURN n;
END;
$$;

REVOKE EXECUTE ON FUNCTION prune_audit_log(INTEGER, TEXT) FROM PUBLIC;
