"""Dramatiq broker set-up and actors (dispatch, start, stop, sweep, refresh, drain)."""
