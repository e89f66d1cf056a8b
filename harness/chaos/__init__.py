"""The chaos harness: a seeded fault schedule (``schedule``), the nemesis that injects it over
listener workers on test hosts and records what it did (``nemesis``), and the checker that judges
the recorded history (``checker``). ``bench/chaos.py`` runs it; ``tests/chaos/`` tests it."""
