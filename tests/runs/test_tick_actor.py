"""The tick_job_runs actor: on the default queue, in the periodic table, publishes a slot once."""

from __future__ import annotations

from models.run_log import JobRunOutbox, RunLog


def test_the_tick_actor_publishes_the_scheduled_slot_once_and_drains(
    db, publisher, settings, actor_runtime, frozen_clock
):
    import actors.runs
    from scheduler.table import PERIODIC

    actor_runtime(settings)

    assert actors.runs.tick_job_runs.queue_name == "default"
    [entry] = [e for e in PERIODIC if e.actor == "tick_job_runs"]
    assert entry.cron == "* * * * *" and len(entry.envs) == 3

    first = actors.runs.tick_job_runs.fn()
    second = actors.runs.tick_job_runs.fn()  # a doubled tick
    assert first["queued"] == ["heartbeat@2024-05-21T18:00:00Z"] and second["queued"] == []
    assert second["duplicate"] == first["queued"]
    assert RunLog.select().count() == 1
    assert JobRunOutbox.select().where(JobRunOutbox.published_at.is_null()).count() == 0
