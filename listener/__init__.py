"""The match listener body: push-stream client, archive, event pipeline, MatchListener, schedule refresh."""
