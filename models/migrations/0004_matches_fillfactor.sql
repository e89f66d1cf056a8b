-- depends: 0003_job_runs
-- Leave room on every matches page so row updates that touch no indexed column (the dispatch
-- tick saving a start's message id into listener_start_settings, heartbeats of the publisher's
-- refresh) are HOT updates: the new row version stays on its page and no index gets an entry.
-- Applies to pages written from now on; an existing table gets it fully after VACUUM FULL.
ALTER TABLE matches SET (fillfactor = 70);
