"""Every ``--json`` prints exactly one JSON document, an object: each such command is run here."""

from __future__ import annotations

import json
import time

import click
import dramatiq
import pytest
from click.testing import CliRunner

from cli.main import cli
from models.coordination import connect_redis
from tests.lifecycle.helpers import add_match_args

#: --json commands whose run needs real processes or a feed: each is parsed as one document there.
ELSEWHERE = {
    "demo": "tests/e2e/test_demo.py",
    "listen": "tests/listener/test_listen_cli.py",
    "sim clone": "tests/srsim/test_clone.py",
    "trades retry": "tests/publisher/test_trade_reconcile.py",
    "events import": "tests/lifecycle/test_event_log_admin.py",
    "events prune": "tests/lifecycle/test_event_log_admin.py",
    "players sync": "tests/publisher/test_players.py",
    "actions result": "tests/publisher/test_results.py",
    "console lockouts": "tests/console/test_sessions.py",
    "console unlock": "tests/console/test_sessions.py",
}
LINEUP = ["--league", "L1", "--team", "7", "--swap", "3139477:BE", "--season", "2024", "--week", "3"]


def json_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> set[str]:
    found: set[str] = set()
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # also the commands a group builds when looked up (kickoff trigger)
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            found |= json_commands(cmd, (*prefix, name))
        elif any(p.name == "as_json" for p in cmd.params):
            found.add(" ".join((*prefix, name)))
    return found


@pytest.fixture
def json_of(db, redis_client, lifecycle_env, amqp_vhost, broker_queues):
    runner = CliRunner()
    ran: set[str] = set()

    def run(*args: str, codes: tuple[int, ...] = (0,)) -> dict:
        result = runner.invoke(cli, [*args, "--json"], catch_exceptions=False)
        assert result.exit_code in codes, result.output
        doc = json.loads(result.stdout)  # exactly one document: json.loads refuses a second one
        assert isinstance(doc, dict), result.stdout
        words = [a for a in args if not a.startswith("-")]
        ran.add(next(" ".join(words[:n]) for n in (3, 2, 1) if " ".join(words[:n]) in ALL))
        return doc

    run.ran = ran  # type: ignore[attr-defined]
    return run


ALL = json_commands(cli)


def _dead_letter(env: dict[str, str]) -> str:
    message = dramatiq.Message(
        queue_name="default", actor_name="sweep_stale_match_listeners", args=(), kwargs={}, options={}
    )
    client = connect_redis(env["BROKER_URL"])
    ns = env["BROKER_NAMESPACE"]
    client.hset(f"{ns}:default.XQ.msgs", message.message_id, message.encode())
    client.zadd(f"{ns}:default.XQ", {message.message_id: time.time() * 1000})
    return message.message_id


def test_every_json_command_prints_one_object(json_of, lifecycle_env, tmp_path, static_feed, monkeypatch):
    run = json_of
    run("db", "migrate")
    run("db", "status")
    run("amqp", "setup")
    run("config", "show")
    run("check", codes=(0, 1))
    run("scheduler", "--print")

    run("leagues", "add", "nfl")
    run("leagues", "disable", "nfl")
    run("leagues", "enable", "nfl")
    assert run("leagues", "list")["leagues"]
    match_id = run(*add_match_args("sr:match:j", scheduled="2030-01-01T18:00Z"))["id"]
    run("matches", "edit", "sr:match:j", "--title", "J")
    run("matches", "set-dispatch", match_id, "on")
    assert run("matches", "list")["matches"]
    run("matches", "show", match_id)
    pbp = {"game": {"id": "sr:match:j"}, "events": [{"id": "e1"}]}
    feed = static_feed({"/nfl/trial/v7/en/games/sr:match:j/pbp.json": pbp})
    monkeypatch.setenv("SPORTRADAR_BASE_URL", feed)
    assert run("matches", "verify-archive", match_id, codes=(1,))["missing"] == ["e1"]
    assert run("matches", "backfill", match_id)["backfilled"] == 1
    run("listeners", "start", match_id)
    run("listeners", "status")
    run("listeners", "dispatch")
    run("listeners", "stop", match_id, "--reason", "drill")
    run("listeners", "sweep")
    assert (
        run("listeners", "bulk", "dispatch-on", "--match", match_id, "--reason", "drill", "--yes")["count"]
        == 1
    )
    run("enqueue", "sweep_stale_match_listeners")

    dead = _dead_letter(lifecycle_env)
    assert run("dead-letters", "list")["messages"]
    run("dead-letters", "retry", dead)
    run("dead-letters", "purge", "--all")

    action = run("trigger", "lineup", *LINEUP)["tracking_id"]
    run("trigger", "waiver", "--league", "L1", "--team", "7", "--add", "4426515", "--no-key")
    run("trigger", "draft-pick", "--league", "L1", "--team", "7", "--pick", "12", "--espn-id", "4426515")
    run(
        "trigger", "rumor-action", "--league", "L1", "--team", "7", "--season", "2024", "--week", "3",
        "--signal", '{"player_id": 1, "kind": "ruled_out", "confidence": 0.1}',
    )  # fmt: skip
    run("trigger", "show", action)
    run("actions", "show", action)
    run("actions", "verify")
    run("trigger", "result", action, "succeeded")
    run("players", "roster", "list")
    key_id = run("apikeys", "create", "--name", "ci", "--scope", "read")["id"]
    assert run("apikeys", "list")["keys"]
    run("apikeys", "revoke", key_id)
    run("outbox", "drain")
    run("outbox", "status")
    run("outbox", "retry-dead")
    run("trades", "reconcile")
    run("runs", "dead")

    assert run("runs", "catalog")["jobs"]
    run_id = run("runs", "publish", "noop")["run_id"]
    assert run("runs", "list")["runs"]
    run("runs", "show", run_id)
    run("runs", "drain")
    run("runs", "cancel", run_id)
    run("runs", "retry", run_id)
    log = tmp_path / "run.log"
    log.write_text("done\n")
    from models.run_log import RunLog

    RunLog.update(log_path=str(log)).where(RunLog.id == run_id).execute()
    assert run("runs", "logs", run_id)["lines"] == ["done"]

    entries = run("audit", "list")["entries"]
    assert {"listener.stop", "match.dispatch_on", "match.edit"} <= {e["action"] for e in entries}
    assert list(run("audit", "list", "--action", "listener.stop")) == ["entries"]
    run("audit", "prune")

    assert ALL - run.ran == set(ELSEWHERE), "a --json command is not covered here or in ELSEWHERE"
