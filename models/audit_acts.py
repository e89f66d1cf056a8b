"""The list of audited acts, in one place: every action an audit entry may name, and which action each
state-changing route, console form and CLI command writes.

``record_audit`` refuses an action not in ACTIONS; tests/lifecycle/test_audit_acts.py walks every
route of the application and every CLI command against API, CONSOLE and CLI (a new state-changing
surface without its line fails it), and docs/lifecycle.md's table lists the same actions.
"""

from __future__ import annotations

#: Every action an entry may name, with what it records.
ACTIONS: dict[str, str] = {
    "listener.start": "a listener start",
    "listener.force_start": "a forced listener start (reason required)",
    "listener.stop": "a listener stop (reason required; written before the stop)",
    "listeners.bulk": "a bulk action (reason required; each match's act has its own entry)",
    "listeners.dispatch": "a dispatch run by an operator (written before it runs)",
    "listeners.sweep": "a sweep run by an operator (written before it runs)",
    "match.add": "a match added by hand",
    "match.dispatch_on": "auto-dispatch turned on",
    "match.dispatch_off": "auto-dispatch turned off",
    "match.edit": "a match's settings changed",
    "match.clone": "a match cloned (sim clone)",
    "match.backfill": "a match's archive backfilled by an operator (written before the backfill)",
    "archive.verify": "a match's archive verified against the provider (written before the call)",
    "league.add": "a league added",
    "league.enable": "a league enabled",
    "league.disable": "a league disabled",
    "roster.add": "players added to a league's roster",
    "players.sync": "a player sync run by an operator (alerts to consumers)",
    "trigger.send": "a trigger request (written before the send; the target is its queue)",
    "trigger.rumor_action": "a rumor-action request (written before its triggers are sent)",
    "trade.approve": "an offer approval claimed and published",
    "trade.decide": "an incoming trade's decision claimed and published",
    "trade.counter": "a counter-offer staged",
    "trade.reconcile": "a trade claim resolved by an operator (written before a republish is sent)",
    "trade.retry": "a refused or pending trade claim sent again (written before the send)",
    "action.result": "a consumer's result reported for an action",
    "outbox.retry_dead": "dead outbox rows queued again",
    "outbox.drain": "an outbox drain run by an operator",
    "run.publish": "a job run published",
    "run.cancel": "a job run cancelled",
    "run.retry": "a job run retried",
    "runs.drain": "a run outbox drain run by an operator",
    "dead_letter.retry": "a dead letter sent again (written before the send)",
    "dead_letter.purge": "dead letters deleted (written before the delete)",
    "actor.enqueue": "an actor message enqueued by hand",
    "apikey.create": "an API key created (never the key itself)",
    "apikey.revoke": "an API key revoked",
    "console.sign_in": "a console session opened",
    "console.sign_out": "a console session ended",
    "console.sign_in_failed": "a refused console sign-in of a stored key (a guess is counted and logged)",
    "console.unlock": "a console sign-in lock lifted (its counted refusals deleted)",
    "events.prune": "event log rows older than a cutoff deleted (refused while a match of the range is live)",
    "audit.prune": "entries older than the retention deleted (written by prune_audit_log itself)",
}

#: The API's state-changing routes (method, path template) and the action each writes.
API: dict[tuple[str, str], str] = {
    ("POST", "/v1/runs"): "run.publish",
    ("POST", "/v1/apikeys"): "apikey.create",
    ("DELETE", "/v1/apikeys/{key_id}"): "apikey.revoke",
    ("POST", "/v1/listeners/bulk"): "listeners.bulk",
    ("POST", "/v1/listeners/dispatch"): "listeners.dispatch",
    ("POST", "/v1/listeners/sweep"): "listeners.sweep",
    ("POST", "/v1/matches/{match_id}/auto-dispatch"): "match.dispatch_on",
    ("POST", "/v1/matches/{match_id}/start-listener"): "listener.start",
    ("POST", "/v1/matches/{match_id}/stop-listener"): "listener.stop",
    ("POST", "/v1/matches/{match_id}/archive/verify"): "archive.verify",
    ("POST", "/v1/actions/{tracking_id}/result"): "action.result",
    ("POST", "/v1/trade/offers/{offer_key}/approve"): "trade.approve",
    ("POST", "/v1/trade/incoming/{trade_id}/decision"): "trade.decide",
    ("POST", "/v1/trade/incoming/{trade_id}/decision/retry"): "trade.retry",
    ("POST", "/v1/trade/incoming/{trade_id}/counter"): "trade.counter",
    ("POST", "/v1/trade/reconcile"): "trade.reconcile",
    ("POST", "/v1/trigger/rumor-action"): "trigger.rumor_action",
}
#: Every other ``POST /v1/trigger/<queue>`` route (one per declared trigger queue) writes this.
TRIGGER_ROUTE_ACTION = "trigger.send"

#: The console's forms (method, path) and the action each writes.
CONSOLE: dict[tuple[str, str], str] = {
    ("POST", "/board/bulk"): "",  # the preview: changes nothing, writes nothing
    ("POST", "/board/bulk/confirm"): "listeners.bulk",
    ("POST", "/board/dispatch"): "listeners.dispatch",
    ("POST", "/board/sweep"): "listeners.sweep",
    ("POST", "/clone"): "match.clone",
    ("POST", "/keys"): "apikey.create",
    ("POST", "/keys/{key_id}/revoke"): "apikey.revoke",
    ("POST", "/matches/{match_id}/auto-dispatch"): "match.dispatch_on",
    ("POST", "/matches/{match_id}/settings"): "match.edit",
    ("POST", "/matches/{match_id}/start"): "listener.start",
    ("POST", "/matches/{match_id}/stop"): "listener.stop",
    ("POST", "/outbox/{row_id}/retry"): "outbox.retry_dead",
    ("POST", "/runs"): "run.publish",
    ("POST", "/runs/{run_id}/cancel"): "run.cancel",
    ("POST", "/runs/{run_id}/retry"): "run.retry",
    ("POST", "/sign-in"): "console.sign_in",
    ("POST", "/sign-out"): "console.sign_out",
    ("POST", "/trades/reconcile"): "trade.reconcile",
}

#: The CLI's state-changing commands and the action each writes.
CLI: dict[str, str] = {
    "actions result": "action.result",
    "apikeys create": "apikey.create",
    "apikeys revoke": "apikey.revoke",
    "audit prune": "audit.prune",
    "dead-letters purge": "dead_letter.purge",
    "dead-letters retry": "dead_letter.retry",
    "enqueue": "actor.enqueue",
    "leagues add": "league.add",
    "leagues disable": "league.disable",
    "leagues enable": "league.enable",
    "listeners bulk": "listeners.bulk",
    "listeners dispatch": "listeners.dispatch",
    "listeners start": "listener.start",
    "listeners stop": "listener.stop",
    "listeners sweep": "listeners.sweep",
    "matches add": "match.add",
    "matches backfill": "match.backfill",
    "matches edit": "match.edit",
    "matches set-dispatch": "match.dispatch_on",
    "matches verify-archive": "archive.verify",
    "outbox drain": "outbox.drain",
    "outbox retry-dead": "outbox.retry_dead",
    "players roster add": "roster.add",
    "players sync": "players.sync",
    "runs cancel": "run.cancel",
    "runs drain": "runs.drain",
    "runs publish": "run.publish",
    "runs retry": "run.retry",
    "sim clone": "match.clone",
    "trades reconcile": "trade.reconcile",
    "trades retry": "trade.retry",
    "events prune": "events.prune",
    "console unlock": "console.unlock",
}

#: CLI commands that are no operator act, and why: reads, long-running processes, deployment steps
#: and HTTP clients of the API (whose routes write the entries).
CLI_NOT_ACTS: dict[str, str] = {
    **{
        name: "a read"
        for name in (
            "actions show",
            "apikeys list",
            "audit export",
            "audit list",
            "check",
            "config example",
            "config show",
            "console lockouts",
            "db status",
            "dead-letters list",
            "leagues list",
            "listeners status",
            "matches export",
            "matches list",
            "matches show",
            "outbox status",
            "players roster list",
            "runs catalog",
            "runs dead",
            "runs list",
            "runs logs",
            "runs show",
            "trigger show",
        )
    },
    **{
        name: "a process (its acts are the workers' own)"
        for name in ("launcher", "listen", "scheduler", "serve", "sim serve", "up", "demo")
    },
    "db migrate": "deployment: runs as the owner's role (yoyo's log records each migration)",
    "amqp setup": "deployment: declares queues (idempotent)",
    "events import": "deployment: loads an existing DATA_DIR's archive files into the log (idempotent)",
    "actions verify": "the verification loop's own pass (what the worker does every minute)",
    "trigger result": "an HTTP client: POST /v1/actions/{id}/result writes the entry",
    "trigger rumor-action": "an HTTP client: POST /v1/trigger/rumor-action writes the entry",
}


#: Actions written by the same surfaces as another (a forced start, dispatch off).
VARIANT_OF: dict[str, str] = {
    "listener.force_start": "listener.start",
    "match.dispatch_off": "match.dispatch_on",
}


def check_action(action: str) -> str:
    """``action`` when ACTIONS declares it; ValueError otherwise (a programming error)."""
    if action not in ACTIONS:
        raise ValueError(f"audit action {action!r} is not declared in models.audit_acts.ACTIONS")
    return action


def acts_table() -> str:
    """The Markdown table of docs/lifecycle.md "The audit log": each action, what it records and where
    it is written (generated from the declarations above; a test compares the two)."""
    lines = ["| action | records | written by |", "|---|---|---|"]
    for action, what in ACTIONS.items():
        base = VARIANT_OF.get(action, action)
        where = [f"`kickoff {c}`" for c, a in CLI.items() if a == base]
        where += [f"`{m} {p}`" for (m, p), a in API.items() if a == base]
        if action == TRIGGER_ROUTE_ACTION:
            where.append("`POST /v1/trigger/<queue>`")
        where += [f"console `{m} {p}`" for (m, p), a in CONSOLE.items() if a == base]
        lines.append(f"| `{action}` | {what} | {', '.join(where) or 'the worker or the database itself'} |")
    return "\n".join(lines) + "\n"
