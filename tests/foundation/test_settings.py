"""Settings precedence (keyword > environment > .env > defaults) and the secret API key."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.main import cli
from config.settings import (
    ENV_FILE,
    REPO_ROOT,
    KickoffSettings,
    MatchListenerEnvironment,
    env_example,
    load_listener_settings,
    load_settings,
    mask_url,
    own_fields,
)

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(MatchListenerEnvironment.model_fields):
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / ".env"
    path.write_text("APP_ENV=staging\nLISTENER_HEARTBEAT_INTERVAL_SECONDS=7\nDATA_DIR=/from/envfile\n")
    return path


def test_defaults_apply_when_nothing_else_is_set(clean_env):
    s = MatchListenerEnvironment(_env_file=None)
    assert s.app_env == "develop"
    assert s.listener_heartbeat_interval_seconds == 30
    assert s.database_url == "postgresql://postgres@127.0.0.1:5432/kickoff"
    assert s.redis_url.endswith("/0") and s.broker_url.endswith("/2")


def test_the_env_file_beats_the_defaults(clean_env, env_file):
    s = MatchListenerEnvironment(_env_file=env_file)
    assert s.app_env == "staging"
    assert s.listener_heartbeat_interval_seconds == 7


def test_the_process_environment_beats_the_env_file(clean_env, env_file):
    clean_env.setenv("APP_ENV", "production")
    s = MatchListenerEnvironment(_env_file=env_file)
    assert s.app_env == "production"
    assert s.listener_heartbeat_interval_seconds == 7  # still from .env
    assert str(s.data_dir) == "/from/envfile"


def test_keyword_arguments_beat_everything(clean_env, env_file):
    clean_env.setenv("APP_ENV", "production")
    clean_env.setenv("LISTENER_HEARTBEAT_INTERVAL_SECONDS", "9")
    s = MatchListenerEnvironment(_env_file=env_file, app_env="develop")
    assert s.app_env == "develop"  # keyword over environment
    assert s.listener_heartbeat_interval_seconds == 9  # environment over .env
    assert str(s.data_dir) == "/from/envfile"  # .env over default
    assert s.listener_stop_poll_seconds == 1.0  # default


def test_variable_names_are_field_names_upper_cased_without_prefix(clean_env):
    clean_env.setenv("LISTENER_DRY_RUN", "true")
    clean_env.setenv("DATABASE_URL", "postgresql://u@db:5432/x")
    s = MatchListenerEnvironment(_env_file=None)
    assert s.listener_dry_run is True
    assert s.database_url == "postgresql://u@db:5432/x"


def test_the_database_concurrency_limit_still_reads_its_older_variable_name(clean_env):
    clean_env.setenv("LISTENER_DB_SLOTS_PER_PROCESS", "3")
    assert MatchListenerEnvironment(_env_file=None).listener_db_concurrency == 3
    clean_env.setenv("LISTENER_DB_CONCURRENCY", "5")
    assert MatchListenerEnvironment(_env_file=None).listener_db_concurrency == 5  # the current name wins


def test_the_default_env_file_is_at_the_repository_root():
    assert ENV_FILE == REPO_ROOT / ".env"
    assert (REPO_ROOT / "pyproject.toml").exists()


def test_a_listener_environment_is_kickoff_settings_plus_listener_settings_only():
    assert issubclass(MatchListenerEnvironment, KickoffSettings)
    own = own_fields(MatchListenerEnvironment)
    assert "listener_dry_run" in own
    assert [name for name in own if not name.startswith("listener_")] == []
    assert own_fields(KickoffSettings) == list(KickoffSettings.model_fields)


#: The code that runs a listener (its body, a run's start and the worker's runtime, ``kickoff listen``):
#: the only code that may read a setting KickoffSettings lacks. ``listener/play_by_play.py`` is not in it:
#: its play_by_play_url builds the URL an archive verification fetches too.
LISTENER_RUN_CODE = (
    "listener/",
    "lifecycle/listen.py",
    "lifecycle/listener_run.py",
    "lifecycle/guarded_start.py",
    "lifecycle/runtime.py",
    "cli/listen.py",
    "actors/actor_runtime.py",  # a listener worker's runtime: LISTENER_DB_CONCURRENCY sizes its pool
)
SHARED_WITH_LISTENERS = ("listener/play_by_play.py",)


def _listener_settings_read_outside_a_listener_run() -> dict[str, list[str]]:
    """``{field: [where]}`` of each ``listener_*`` setting code that runs no listener reads (an attribute)."""
    import ast

    from tests.project import ROOT, product_modules

    names = {name for name in MatchListenerEnvironment.model_fields if name.startswith("listener_")}
    found: dict[str, list[str]] = {}
    for path in product_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(LISTENER_RUN_CODE) and rel not in SHARED_WITH_LISTENERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Attribute) and node.attr in names:
                found.setdefault(node.attr, []).append(f"{rel}:{node.lineno}")
    return found


def test_code_that_runs_no_listener_reads_only_kickoff_settings():
    read = _listener_settings_read_outside_a_listener_run()
    assert "listener_heartbeat_stale_seconds" in read  # the scan sees the lifecycle code
    only_a_listeners = {
        name: where for name, where in read.items() if name not in KickoffSettings.model_fields
    }
    assert only_a_listeners == {}, "move these to KickoffSettings' listener lifecycle section"


def test_kickoff_settings_hold_no_setting_only_a_listener_reads():
    read = _listener_settings_read_outside_a_listener_run()
    lifecycle = [name for name in KickoffSettings.model_fields if name.startswith("listener_")]
    assert "listener_dispatch_within_minutes" in lifecycle
    assert [name for name in lifecycle if name not in read] == [], "only a listener reads these"


def test_the_api_and_the_cli_read_kickoff_settings_not_a_listeners(clean_env):
    from api.app import create_app
    from cli.context import CliContext

    assert type(create_app().state.ctx.settings) is KickoffSettings
    seen: list[object] = []

    @cli.command("probe-settings")
    @click.pass_obj
    def probe(obj: CliContext) -> None:
        seen.append(obj.settings)

    try:
        result = CliRunner().invoke(cli, ["probe-settings"])
    finally:
        cli.commands.pop("probe-settings")
    assert result.exit_code == 0, result.output
    assert [type(s) for s in seen] == [KickoffSettings]


#: A value only a running listener reads, and invalid (it must be > 0).
BAD_LISTENER_ONLY = ("LISTENER_MAX_BAD_LINES", "0")

SENDER_BOOT = """
import actors
from actors.actor_runtime import current
from api.app import create_app

create_app()
print(type(current().settings).__name__)
"""


def test_a_bad_listener_only_value_does_not_stop_a_process_that_only_sends(clean_env):
    import os
    import subprocess
    import sys

    assert BAD_LISTENER_ONLY[0].lower() not in KickoffSettings.model_fields
    env = {k: v for k, v in os.environ.items() if k.lower() not in MatchListenerEnvironment.model_fields}
    env[BAD_LISTENER_ONLY[0]] = BAD_LISTENER_ONLY[1]
    # A fresh interpreter: importing actors (as the API's boot, the CLI's senders and the scheduler do)
    # configures the actor runtime from the environment.
    argv = [sys.executable, "-c", SENDER_BOOT]
    result = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["KickoffSettings"]


@pytest.fixture
def kickoff_runtime(clean_env):
    """The actor runtime on KickoffSettings (a StubBroker, in-memory coordination) until the test ends."""
    from dramatiq.brokers.stub import StubBroker

    import actors  # noqa: F401  declares every actor
    from actors import actor_runtime
    from actors.middleware import WorkerHooks
    from tests.fakes.coordination import MemoryCoordinationStore

    original = actor_runtime.current()
    settings = load_settings(_env_file=None, database_pool_max_connections=None, app_env="staging")
    broker = StubBroker()
    broker.add_middleware(WorkerHooks())
    actor_runtime.configure(
        settings, broker=broker, coordination=MemoryCoordinationStore.from_settings(settings)
    )
    yield actor_runtime
    actor_runtime.configure(original.settings, broker=original.broker, coordination=original.coordination)
    broker.close()


def test_a_listener_worker_refuses_a_bad_listener_only_value_at_boot(kickoff_runtime, clean_env):
    import dramatiq

    from actors.listeners import read_listener_settings, register_boot_hook
    from actors.middleware import BootCheckFailed
    from config.errors import ConfigurationError

    clean_env.setenv(*BAD_LISTENER_ONLY)
    read_listener_settings(dramatiq.Worker(kickoff_runtime.current().broker, queues={"default"}))
    assert type(kickoff_runtime.current().settings) is KickoffSettings  # a default worker never reads them
    with pytest.raises(ConfigurationError, match=r"^invalid setting LISTENER_MAX_BAD_LINES: "):
        kickoff_runtime.listener_settings()
    register_boot_hook()  # on this broker's WorkerHooks, as importing actors does on its broker
    for queues in ({"match_listeners"}, None):  # None: every queue
        worker = dramatiq.Worker(kickoff_runtime.current().broker, queues=queues, worker_threads=1)
        with pytest.raises(BootCheckFailed, match="invalid setting LISTENER_MAX_BAD_LINES: ") as failed:
            worker.start()  # before any thread takes a message
        assert isinstance(failed.value.__cause__, ConfigurationError)
        assert not worker.workers
    assert type(kickoff_runtime.current().settings) is KickoffSettings


def test_a_listener_worker_runs_on_its_kickoff_settings_plus_the_listener_ones(kickoff_runtime, clean_env):
    clean_env.setenv("LISTENER_MAX_BAD_LINES", "7")
    clean_env.setenv("APP_ENV", "production")  # read at process start only: the runtime's value stays
    before = kickoff_runtime.current()
    settings = kickoff_runtime.listener_settings()
    assert type(settings) is MatchListenerEnvironment
    assert settings.listener_max_bad_lines == 7 and settings.app_env == "staging"
    after = kickoff_runtime.current()
    assert after.settings is settings and kickoff_runtime.listener_settings() is settings
    assert (after.broker, after.coordination) == (before.broker, before.coordination)


def test_each_loader_builds_its_own_class(clean_env):
    assert type(load_settings(_env_file=None)) is KickoffSettings
    assert type(load_listener_settings(_env_file=None)) is MatchListenerEnvironment


class _RecordingActor:
    def __init__(self, name: str, sent: list[tuple[str, str]]) -> None:
        self.name, self.sent = name, sent

    def send_with_options(self, *, kwargs: dict, scheduled_at: str) -> None:
        self.sent.append((self.name, scheduled_at))


class _RecordingBroker:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def get_actor(self, name: str) -> _RecordingActor:
        return _RecordingActor(name, self.sent)


def test_the_scheduler_runs_on_kickoff_settings(clean_env):
    from scheduler.runner import build_senders
    from scheduler.table import entries_for
    from tests.fakes.coordination import MemoryCoordinationStore

    settings = load_settings(_env_file=None, app_env="staging", scheduler_tick_ttl_seconds=120)
    broker = _RecordingBroker()
    senders = build_senders(settings, broker=broker, coordination=MemoryCoordinationStore())
    assert [s.entry.name for s in senders] == [e.name for e in entries_for("staging")]
    assert {s.tick_ttl_seconds for s in senders} == {120}
    assert senders[0].send_with_options(scheduled_at="2030-01-01T10:00:00+00:00") is True
    assert broker.sent == [(senders[0].entry.actor, "2030-01-01T10:00:00+00:00")]


def test_the_api_key_never_appears_in_repr_or_str(clean_env):
    s = MatchListenerEnvironment(_env_file=None, sportradar_api_key=SECRET)
    assert SECRET not in repr(s)
    assert SECRET not in str(s)
    assert SECRET not in str(s.describe())
    assert s.sportradar_api_key.get_secret_value() == SECRET


def test_the_api_key_never_appears_in_logs(clean_env, caplog):
    s = MatchListenerEnvironment(_env_file=None, sportradar_api_key=SECRET)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kickoff.test").info("settings %s %r", s, s.describe())
    assert SECRET not in caplog.text


def test_the_api_key_never_appears_in_cli_output(clean_env):
    clean_env.setenv("SPORTRADAR_API_KEY", SECRET)
    runner = CliRunner()
    for args in (["config", "show"], ["config", "show", "--json"], ["config", "example"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
    assert "***" in runner.invoke(cli, ["config", "show"]).output


def test_url_passwords_are_masked():
    assert mask_url("amqp://guest:hunter2@h:5672/%2F") == "amqp://guest:***@h:5672/%2F"
    assert mask_url("postgresql://postgres@h/db") == "postgresql://postgres@h/db"


def test_secret_query_values_are_masked():
    assert mask_url("postgresql://u@h/db?password=hunter2&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )
    masked = mask_url("http://u:p@h/x?api_key=k1&Token=k2&client_secret=k3&sslpassword=k4&key=k5&keep=1")
    assert masked == "http://u:***@h/x?api_key=***&Token=***&client_secret=***&sslpassword=***&key=***&keep=1"
    assert mask_url("redis://h/0?password=") == "redis://h/0?password="


def test_config_show_masks_query_string_secrets(clean_env):
    clean_env.setenv("DATABASE_URL", f"postgresql://u@h/db?password={SECRET}")
    clean_env.setenv("SPORTRADAR_BASE_URL", f"http://feed.example/?api_key={SECRET}")
    clean_env.setenv("PLAYERS_SOURCE", f"{{base_url}}/players/nfl?token={SECRET}")
    runner = CliRunner()
    for args in (["config", "show"], ["config", "show", "--json"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output and "password=***" in result.output


def test_env_example_lists_every_field_and_matches_the_committed_file():
    text = env_example()
    for name in MatchListenerEnvironment.model_fields:
        assert f"\n{name.upper()}=" in text
    assert (REPO_ROOT / ".env.example").read_text() == text, (
        "regenerate with: kickoff config example > .env.example"
    )


def test_an_invalid_setting_is_refused_with_its_name(clean_env):
    clean_env.setenv("APP_ENV", "moon")
    with pytest.raises(ValueError, match="app_env"):
        MatchListenerEnvironment(_env_file=None)


def test_the_default_job_catalog_is_the_shipped_file_wherever_kickoff_is_checked_out(clean_env):
    s = MatchListenerEnvironment(_env_file=None)
    assert s.job_catalog_path == REPO_ROOT / "runs" / "catalog.yaml"
    assert s.job_catalog_path.is_file()
    assert "\nJOB_CATALOG_PATH=runs/catalog.yaml\n" in env_example()


def test_an_absolute_job_catalog_path_is_kept(clean_env, tmp_path):
    s = MatchListenerEnvironment(_env_file=None, job_catalog_path=tmp_path / "jobs.yaml")
    assert s.job_catalog_path == tmp_path / "jobs.yaml"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("LOG_LEVEL", "LOUD", "invalid setting LOG_LEVEL: unknown log level 'LOUD'"),
        ("DATABASE_URL", "notaurl", "invalid setting DATABASE_URL: expected a postgresql:// URL"),
        ("DATABASE_URL", "mysql://root@db/kickoff", "invalid setting DATABASE_URL: expected a postgresql://"),
        ("REDIS_URL", "http://127.0.0.1:6379/0", "invalid setting REDIS_URL: expected a redis:// URL"),
        ("BROKER_URL", "http://127.0.0.1/2", "invalid setting BROKER_URL: expected a redis:// or amqp://"),
        ("AMQP_URL", "redis://127.0.0.1/0", "invalid setting AMQP_URL: expected a amqp:// URL"),
    ],
)
def test_a_bad_log_level_or_url_scheme_is_one_line_naming_the_setting(clean_env, name, value, says):
    clean_env.setenv(name, value)
    result = CliRunner().invoke(cli, ["config", "show"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: {result.output.strip()[7:]}"]
    assert says in result.output and "Traceback" not in result.output


def test_log_level_is_case_insensitive(clean_env):
    assert MatchListenerEnvironment(_env_file=None, log_level="debug").log_level == "DEBUG"


def test_the_env_example_copied_to_env_works_and_empty_means_unset(clean_env, tmp_path, monkeypatch):
    copied = tmp_path / ".env"
    copied.write_text((REPO_ROOT / ".env.example").read_text())
    assert "\nLISTENER_TEST_DURATION_SECONDS=\n" in copied.read_text()
    settings = MatchListenerEnvironment(_env_file=copied)
    assert settings.listener_test_duration_seconds is None
    assert settings.listener_force_exit_code is None
    assert settings.sentry_dsn.get_secret_value() == ""
    for cls in (KickoffSettings, MatchListenerEnvironment):
        monkeypatch.setitem(cls.model_config, "env_file", copied)
    result = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["listener_test_duration_seconds"] is None


def test_an_empty_environment_variable_means_unset(clean_env):
    clean_env.setenv("LISTENER_HEARTBEAT_INTERVAL_SECONDS", "")
    assert MatchListenerEnvironment(_env_file=None).listener_heartbeat_interval_seconds == 30
