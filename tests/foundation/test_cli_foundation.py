"""The kickoff CLI's foundation commands, run as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from models.migrate import drop_database


def kickoff(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_kickoff_help_lists_the_command_groups(subprocess_env):
    result = kickoff("--help", env=subprocess_env)
    assert result.returncode == 0
    for group in ("db", "config", "check"):
        assert group in result.stdout


@pytest.fixture
def fresh_database_env(subprocess_env):
    url = f"postgresql://postgres@127.0.0.1:5432/kickoff_fresh_{uuid.uuid4().hex[:8]}"
    env = dict(subprocess_env, DATABASE_URL=url)
    yield env
    drop_database(url)


def test_migrate_creates_the_database_and_a_second_run_is_a_no_op(fresh_database_env):
    first = kickoff("db", "migrate", "--json", env=fresh_database_env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["created_database"] is True
    assert "0001_foundation" in report["applied"]
    assert first.stderr == ""  # what it did is in the answer, not logged beside it
    second = kickoff("db", "migrate", env=fresh_database_env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines() == [
        f"database {report['database']} is up to date (nothing to apply)"
    ]
    assert second.stderr == ""


def test_a_bad_database_url_gives_one_line_naming_the_setting_and_address(subprocess_env):
    env = dict(subprocess_env, DATABASE_URL="postgresql://postgres:pw@127.0.0.1:1/nowhere")
    result = kickoff("db", "migrate", env=env)
    assert result.returncode == 5  # unavailable (cli/answers.EXIT_OF)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "DATABASE_URL=postgresql://postgres:***@127.0.0.1:1/nowhere" in lines[0]
    assert "Traceback" not in result.stderr and "pw@" not in result.stderr


def test_a_redis_that_does_not_answer_gives_one_line_naming_the_setting(subprocess_env, db, amqp_vhost):
    assert kickoff("amqp", "setup", env=subprocess_env).returncode == 0
    env = dict(subprocess_env, REDIS_URL="redis://127.0.0.1:1/0")
    result = kickoff("check", "--services", env=env)
    assert result.returncode == 1
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == [fails[0]] and "REDIS_URL=redis://127.0.0.1:1/0" in fails[0]
    assert "Traceback" not in result.stderr


def test_an_unreachable_rabbitmq_gives_one_line_naming_the_setting(subprocess_env, db):
    env = dict(subprocess_env, AMQP_URL="amqp://guest:secretpw@127.0.0.1:1/%2F")
    result = kickoff("check", "--services", env=env)
    assert result.returncode == 1
    fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and "AMQP_URL=amqp://guest:***@127.0.0.1:1/%2F" in fails[0]
    assert "secretpw" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_every_service_ok_when_they_answer(subprocess_env, db, amqp_vhost):
    setup = kickoff("amqp", "setup", env=subprocess_env)
    assert setup.returncode == 0, setup.stderr
    result = kickoff("check", "--services", "--json", env=subprocess_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["ok"] is True


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture
def unmigrated_env(subprocess_env):
    """A database that exists but was never migrated."""
    import psycopg2

    name = f"kickoff_bare_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    yield dict(subprocess_env, DATABASE_URL=url)
    drop_database(url)


@pytest.mark.parametrize(
    "args",
    [("leagues", "list"), ("matches", "list"), ("listeners", "status"), ("leagues", "add", "nfl")],
    ids=["leagues-list", "matches-list", "listeners-status", "leagues-add"],
)
def test_a_database_never_migrated_says_so_in_one_line(unmigrated_env, args):
    line = one_error_line(kickoff(*args, env=unmigrated_env))
    assert line.startswith("Error: database not migrated: run kickoff db migrate")


def test_check_on_a_database_never_migrated_fails_naming_the_fix(unmigrated_env):
    result = kickoff("check", "--json", env=unmigrated_env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [migrations] = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "migrations"]
    assert migrations["status"] == "FAIL" and migrations["detail"].endswith("run kickoff db migrate")


def test_db_status_lists_pending_then_applied_migrations(unmigrated_env):
    before = kickoff("db", "status", "--json", env=unmigrated_env)
    assert before.returncode == 1
    report = json.loads(before.stdout)
    assert report["applied"] == [] and report["pending"][0] == "0001_foundation"
    assert "0009_league_name_ci" in report["pending"]
    assert kickoff("db", "migrate", env=unmigrated_env).returncode == 0
    after = kickoff("db", "status", env=unmigrated_env)
    assert after.returncode == 0 and "applied  0009_league_name_ci" in after.stdout
    assert "up to date" in after.stdout


def test_an_unknown_role_is_not_told_to_migrate(subprocess_env):
    env = dict(subprocess_env, DATABASE_URL="postgresql://nosuchrole@127.0.0.1:5432/postgres")
    line = one_error_line(kickoff("leagues", "list", env=env))
    assert "DATABASE_URL=" in line and 'role "nosuchrole" does not exist' in line
    assert "migrate" not in line


@pytest.mark.parametrize("url", ["notaurl", "mysql://root@127.0.0.1/kickoff"])
def test_a_database_url_that_is_not_postgresql_is_one_line(subprocess_env, url):
    for args in (("db", "migrate"), ("matches", "list")):
        line = one_error_line(kickoff(*args, env=dict(subprocess_env, DATABASE_URL=url)))
        assert "invalid setting DATABASE_URL: expected a postgresql:// URL" in line


def test_an_unreachable_broker_on_enqueue_and_start_is_one_line_naming_broker_url(subprocess_env, db):
    env = dict(subprocess_env, BROKER_URL="redis://127.0.0.1:1/0")
    line = one_error_line(kickoff("enqueue", "sweep_stale_match_listeners", env=env))
    assert "BROKER_URL=redis://127.0.0.1:1/0" in line
    from models import League, Match

    match = Match.create(
        league=League.create(name="nfl"), sr_id="sr:match:broker", scheduled="2030-01-01T18:00:00+00:00"
    )
    line = one_error_line(kickoff("listeners", "start", str(match.id), env=env))
    assert "BROKER_URL=redis://127.0.0.1:1/0" in line


def test_verbose_prints_the_traceback_too(subprocess_env):
    env = dict(subprocess_env, BROKER_URL="redis://127.0.0.1:1/0")
    result = kickoff("-v", "enqueue", "sweep_stale_match_listeners", env=env)
    assert result.returncode == 5 and "Traceback" in result.stderr  # unavailable (cli/answers.EXIT_OF)
    assert result.stderr.strip().splitlines()[-1].startswith("Error: cannot reach")
