"""The lifecycle's SQL: named statements and the functions that run them, one module per reading.

Each function translates its driver errors (models.boundary); the lifecycle's other modules call
these, or the store functions of ``models/``, and hold no SQL.
"""
