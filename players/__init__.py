"""Players: the players map sync (injury alerts) and rumor scoring, kickoff's decisions about players.

Both sit above the publisher: a sync publishes injury alerts, rumor scoring sends lineup and
waiver moves through the triggers.
"""
