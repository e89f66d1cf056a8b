-- depends: 0005_listener_worker_lease
-- Every publish try of an outbox row, confirmed or not. ``attempts`` counts only the broker's
-- refusals of the message (nack, unroutable with its queue present), which lead to ``dead``;
-- an unreachable broker or a lost confirm only adds a try, which sets the capped backoff.
ALTER TABLE outbox_messages ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
