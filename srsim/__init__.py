"""srsim: the feed simulator (continuous sessions, push streams, schedule API)."""
