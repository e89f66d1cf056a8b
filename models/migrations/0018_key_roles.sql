-- depends: 0017_audit_log
-- Identities and roles: the admin scope (above operator: it alone manages keys over HTTP), a key
-- limited to leagues (NULL: every league), and the key that created an action or a run (NULL: the
-- CLI, the library, the scheduler, or made before this migration).
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scope_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scope_check
    CHECK (scope IN ('trigger', 'operator', 'read', 'admin'));
ALTER TABLE api_keys ADD COLUMN leagues TEXT[];

ALTER TABLE activity_actions ADD COLUMN created_by_key_id UUID;
ALTER TABLE run_log ADD COLUMN created_by_key_id UUID;
