-- depends: 0055_audit_roles
-- When an operator last asked to verify a match's archive against the provider (POST
-- /v1/matches/{id}/archive/verify): one call per match per ARCHIVE_VERIFY_INTERVAL_SECONDS
-- (models.verification.claim_archive_verification), so the route cannot hammer the provider.
ALTER TABLE matches ADD COLUMN archive_verify_claimed_at TIMESTAMPTZ;
