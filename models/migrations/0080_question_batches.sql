-- depends: 0070_listener_takeover
-- The question writes of one committed batch of the event log in one call (issue 34 and 39): the
-- listener's pipeline hands the batch's issues, settles and reopens in order, and this applies
-- each exactly as models/question.py's issue_question, settle_question and reopen_question do
-- (the caller holds the fence: models.fence.fenced, in the same transaction). Returns one result
-- per operation, in order: 'settled' / 'resettled' / null for a settle, the key or null for a
-- reopen, null for an issue.
CREATE FUNCTION kickoff_question_ops(p_match UUID, p_ops JSONB) RETURNS JSONB
LANGUAGE plpgsql AS $$
DECLARE
    op      JSONB;
    q       RECORD;
    held    JSONB;
    outcome TEXT;
    results JSONB := '[]'::jsonb;
    rec     JSONB;
BEGIN
    FOR op IN SELECT * FROM jsonb_array_elements(p_ops) LOOP
        outcome := NULL;
        IF op->>'op' = 'issue' THEN
            INSERT INTO questions (id, match_id, key, prompt, in_game, details, issued_at)
            VALUES (gen_random_uuid(), p_match, op->>'key', op->>'prompt', TRUE, op->'details', clock_timestamp())
            ON CONFLICT (match_id, key) DO UPDATE SET prompt = EXCLUDED.prompt;
        ELSIF op->>'op' = 'settle' THEN
            LOOP
                SELECT id, status, answer, details INTO q FROM questions
                 WHERE match_id = p_match AND key = op->>'key' LIMIT 1 FOR UPDATE;
                IF NOT FOUND THEN
                    rec := jsonb_build_object('op', 'settled', 'answer', op->>'answer',
                                              'event_id', op->'event_id', 'at', op->>'at');
                    INSERT INTO questions (id, match_id, key, prompt, in_game, status, answer, settled_at, details)
                    VALUES (gen_random_uuid(), p_match, op->>'key', op->>'prompt', TRUE, 'settled',
                            op->>'answer', (op->>'at')::timestamptz,
                            op->'details' || jsonb_build_object('settled_by', op->'event_id',
                                                                'settlements', jsonb_build_array(rec)))
                    ON CONFLICT DO NOTHING;
                    IF FOUND THEN
                        outcome := 'settled';
                        EXIT;
                    END IF;
                    CONTINUE;  -- another writer inserted it meanwhile: settle that row
                END IF;
                IF q.status = 'open' THEN
                    outcome := 'settled';
                ELSIF q.status = 'settled' AND coalesce(op->>'event_id', '') <> ''
                      AND q.details->>'settled_by' IS NOT DISTINCT FROM op->>'event_id'
                      AND q.answer IS DISTINCT FROM op->>'answer' THEN
                    outcome := 'resettled';
                ELSE
                    EXIT;
                END IF;
                held := coalesce(q.details, '{}'::jsonb);
                rec := jsonb_build_object('op', outcome, 'answer', op->>'answer',
                                          'event_id', op->'event_id', 'at', op->>'at');
                held := held || jsonb_build_object(
                    'settled_by', op->'event_id',
                    'settlements', coalesce(held->'settlements', '[]'::jsonb) || jsonb_build_array(rec));
                UPDATE questions SET status = 'settled', answer = op->>'answer',
                       settled_at = (op->>'at')::timestamptz, details = held
                 WHERE id = q.id;
                EXIT;
            END LOOP;
        ELSIF op->>'op' = 'reopen' THEN
            SELECT id, key, details INTO q FROM questions
             WHERE match_id = p_match AND status = 'settled' AND details->>'settled_by' = op->>'event_id'
             LIMIT 1 FOR UPDATE;
            IF FOUND THEN
                held := coalesce(q.details, '{}'::jsonb) - 'settled_by';
                rec := jsonb_build_object('op', 'reopened', 'answer', NULL,
                                          'event_id', op->'event_id', 'at', op->>'at');
                held := held || jsonb_build_object(
                    'settlements', coalesce(held->'settlements', '[]'::jsonb) || jsonb_build_array(rec));
                UPDATE questions SET status = 'open', answer = NULL, settled_at = NULL, details = held
                 WHERE id = q.id;
                outcome := q.key;
            END IF;
        ELSE
            RAISE EXCEPTION 'kickoff_question_ops: unknown op %', op->>'op';
        END IF;
        results := results || jsonb_build_array(outcome);
    END LOOP;
    RETURN results;
END
$$;
