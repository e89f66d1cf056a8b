"""The listener control plane: dispatch, the start protocol, heartbeat, stop watch, sweep, leases, board.

It decides which match needs a listener, starts exactly one (pending key, start lock, open-row
guard), keeps it provably alone (heartbeat, worker lease), stops it on request and notices when
it died. The listener body it runs lives in ``listener``; Redis keys and rows in ``models``.
"""
