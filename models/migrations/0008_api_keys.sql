-- depends: 0007_players
-- API keys of `kickoff serve`: only the SHA-256 of a key is stored (the key itself is printed
-- once by `kickoff apikeys create`); a revoked key keeps its row for the audit trail.
CREATE TABLE api_keys (
    id UUID PRIMARY KEY,
    name TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('trigger', 'operator', 'read')),
    key_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
