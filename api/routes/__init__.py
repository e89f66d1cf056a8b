"""The route modules of the API, one per family."""
