-- depends: 0011_start_message_id
-- Console sign-ins: one row per session, keyed by the SHA-256 of the cookie's token (the token
-- itself is only in the browser). A session is valid while its API key is not revoked and it has
-- not expired; deleting the key's row or revoking it ends every session made with it.
CREATE TABLE console_sessions (
    token_hash TEXT PRIMARY KEY,
    api_key_id UUID NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sessions_api_key_idx ON console_sessions (api_key_id);
