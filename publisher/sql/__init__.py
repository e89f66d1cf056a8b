"""The publisher's SQL: named statements, one module per table family (actions, outbox, trades, players).

Job runs (``run_log``) use the Peewee model ``models.run_log.RunLog`` instead.
"""
