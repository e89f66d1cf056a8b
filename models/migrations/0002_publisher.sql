-- depends: 0001_foundation
-- Publisher: activity actions with idempotency keys, the activity outbox, the trade execution_log.

CREATE TABLE activity_actions (
    id                BIGSERIAL PRIMARY KEY,
    tracking_id       UUID NOT NULL UNIQUE,
    league_id         TEXT NOT NULL,
    kind              TEXT NOT NULL,              -- the queue name
    idempotency_key   TEXT,                       -- NULL: no key, or released (see released_key)
    released_key      TEXT,                       -- the key this action held before it was released
    team              TEXT,
    status            TEXT NOT NULL DEFAULT 'queued',
    request           JSONB NOT NULL DEFAULT '{}'::jsonb,
    decision_inputs   JSONB NOT NULL DEFAULT '{}'::jsonb,
    after_tracking_id UUID,
    hold_until        TIMESTAMPTZ,
    run_id            TEXT,
    traceparent       TEXT,
    error             TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at       TIMESTAMPTZ
);
-- The idempotency guard: one action per key and queue in a league (NULL keys never collide).
CREATE UNIQUE INDEX activity_actions_idempotency_idx
    ON activity_actions (league_id, kind, idempotency_key);
CREATE INDEX activity_actions_after_idx ON activity_actions (after_tracking_id)
    WHERE after_tracking_id IS NOT NULL;
CREATE INDEX activity_actions_run_idx ON activity_actions (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE outbox_messages (
    id               BIGSERIAL PRIMARY KEY,
    message_id       UUID NOT NULL UNIQUE,        -- the AMQP message id consumers dedupe on
    queue            TEXT NOT NULL,
    body             JSONB NOT NULL,
    headers          JSONB NOT NULL DEFAULT '{}'::jsonb,
    tracking_id      UUID,
    status           TEXT NOT NULL DEFAULT 'pending',
    held_by          UUID,                        -- parent tracking id a chained claim waits for
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at       TIMESTAMPTZ,
    published_at     TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- The drain's claim query: due pending rows, oldest first.
CREATE INDEX outbox_messages_due_idx ON outbox_messages (next_attempt_at, id)
    WHERE status = 'pending' AND held_by IS NULL;
CREATE INDEX outbox_messages_held_idx ON outbox_messages (held_by)
    WHERE status = 'pending' AND held_by IS NOT NULL;
CREATE INDEX outbox_messages_tracking_idx ON outbox_messages (tracking_id);
CREATE INDEX outbox_messages_dead_idx ON outbox_messages (id) WHERE status = 'dead';

CREATE TABLE execution_log (
    id            BIGSERIAL PRIMARY KEY,
    claim_key     TEXT NOT NULL,                  -- offer_key, decision_key or publication key
    queue         TEXT NOT NULL,
    league_id     TEXT NOT NULL,
    team          TEXT,
    message_id    UUID NOT NULL UNIQUE,
    body          JSONB NOT NULL,
    status        TEXT NOT NULL DEFAULT 'claimed',
    error         TEXT,
    resolution    TEXT,
    resolved_by   TEXT,
    resolved_at   TIMESTAMPTZ,
    result        JSONB,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- One claim per offer / decision / publication key and queue.
CREATE UNIQUE INDEX execution_log_claim_idx ON execution_log (queue, claim_key);
CREATE INDEX execution_log_uncertain_idx ON execution_log (created_at) WHERE status = 'uncertain';
