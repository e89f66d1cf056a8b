-- depends: 0070_listener_takeover
-- Refused console sign-ins by bucket (issue 35): the sign-in throttle's count, shared by every API
-- process and cleared by an operator (`kickoff console unlock`, audited console.unlock). A bucket is
-- ``account:<the presented key's digest, 16 hex>`` (always) or ``address:<client>`` (only when the
-- client's address comes from a trusted proxy's X-Forwarded-For: `kickoff serve --proxy-headers`).
-- Rows older than an hour are deleted as new ones are written; they are not the audit log.
CREATE TABLE console_sign_in_refusals (
    id         BIGSERIAL PRIMARY KEY,
    bucket     TEXT NOT NULL,
    refused_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sign_in_refusals_bucket_idx ON console_sign_in_refusals (bucket, refused_at);
CREATE INDEX console_sign_in_refusals_at_idx ON console_sign_in_refusals (refused_at);
