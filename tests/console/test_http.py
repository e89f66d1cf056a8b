"""The console over plain HTTP: sessions, cookie, CSRF, scopes, and every page read without JavaScript."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.auth import Need, declared_rule
from api.console.app import ROUTERS
from api.keys import Scope, create_key, list_keys, revoke_key
from config.clock import utcnow
from models.listener_record import MatchListenerRecord
from models.match import Match
from tests.console.conftest import write_archive

pytestmark = pytest.mark.services

DUMMY = {
    "match_id": "00000000-0000-4000-8000-000000000002",
    "record_id": "00000000-0000-4000-8000-000000000003",
    "run_id": "00000000-0000-4000-8000-000000000001",
    "row_id": "1",
    "key_id": "00000000-0000-4000-8000-000000000004",
    "name": "console.css",
    "series": "events",
}
CONSOLE_ROUTES = sorted(
    (method, route.path)
    for router in ROUTERS
    for route in router.routes
    for method in route.methods
    if declared_rule(route) == (Need.CONSOLE, None)
)


def _url(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: DUMMY[m.group(1)], path)


@pytest.mark.parametrize(("method", "path"), CONSOLE_ROUTES, ids=[f"{m} {p}" for m, p in CONSOLE_ROUTES])
def test_nothing_of_the_console_answers_without_a_session(console_server, db, method, path):
    answer = httpx.request(method, console_server.url + _url(path), timeout=60, follow_redirects=False)
    if path in ("/events/board", "/events/matches", "/history/data/{series}"):
        assert answer.status_code == 401  # a stream or a script's data is not redirected to a page
    elif method == "GET":
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/sign-in?next=")
    else:
        assert answer.status_code == 403
    assert "data-match-id" not in answer.text


def test_sign_in_refuses_an_unknown_a_revoked_and_a_trigger_key(console_server, console_keys):
    url = console_server.url + "/sign-in"
    form = httpx.get(url, timeout=60)
    assert form.status_code == 200
    assert re.search(r'<label for="api_key">API key</label>', form.text)
    for key, why in (
        ("kk_not-a-key", "not valid"),
        (console_keys["trigger"], "cannot open the console"),
    ):
        answer = httpx.post(url, data={"api_key": key}, timeout=60, follow_redirects=False)
        assert answer.status_code == 401 and why in answer.text
        assert "set-cookie" not in answer.headers
    [read] = [k for k in list_keys() if k.scope is Scope.READ]
    revoke_key(read.id)
    answer = httpx.post(url, data={"api_key": console_keys["read"]}, timeout=60, follow_redirects=False)
    assert answer.status_code == 401


def test_the_session_cookie_is_httponly_and_samesite_strict_and_not_secure_on_plain_localhost(
    console_server, console_keys
):
    answer = httpx.post(
        console_server.url + "/sign-in",
        data={"api_key": console_keys["operator"], "next": "/outbox"},
        timeout=60,
        follow_redirects=False,
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/outbox"
    cookie = answer.headers["set-cookie"]
    attrs = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path"} <= attrs
    assert "samesite=strict" in cookie.lower()
    assert "secure" not in attrs
    assert console_keys["operator"] not in cookie


@pytest.mark.parametrize(
    ("forced", "base_url", "secure"),
    [
        (False, "https://testserver", True),
        (False, "http://testserver", True),  # plain HTTP, but not to a loopback address
        (False, "http://127.0.0.1", False),
        (True, "http://127.0.0.1", True),  # CONSOLE_COOKIE_SECURE: Secure even on plain localhost
    ],
)
def test_the_cookie_is_secure_with_the_host_prefix_unless_plain_localhost(
    settings, db, console_keys, forced, base_url, secure
):
    app = create_app(
        settings.model_copy(
            update={"console_cookie_secure": forced, "api_allowed_hosts": "testserver,127.0.0.1"}
        )
    )
    with TestClient(app, base_url=base_url) as client:
        answer = client.post("/sign-in", data={"api_key": console_keys["read"]}, follow_redirects=False)
    assert answer.status_code == 303
    name, *attrs = [p.strip() for p in answer.headers["set-cookie"].split(";")]
    # plain localhost: the server's port in the name (TestClient's server end is port 80)
    assert name.startswith("__Host-kickoff_console=" if secure else "kickoff_console_80=")
    assert ("Secure" in attrs) is secure


def test_a_sign_in_redirect_never_leaves_the_console(console_server, console_keys):
    for target in ("//evil.example/x", "https://evil.example/", "\\\\evil"):
        answer = httpx.post(
            console_server.url + "/sign-in",
            data={"api_key": console_keys["read"], "next": target},
            timeout=60,
            follow_redirects=False,
        )
        assert answer.headers["location"] == "/"


def test_revoking_the_key_ends_its_session_and_sign_out_ends_it_too(console_server, console_keys, signed_in):
    op = signed_in(console_keys["operator"])
    assert op.client.get("/").status_code == 200
    [operator] = [k for k in list_keys() if k.scope is Scope.OPERATOR]
    revoke_key(operator.id)
    assert op.client.get("/", follow_redirects=False).status_code == 303
    assert op.client.post("/board/sweep", data={"csrf_token": op.csrf}).status_code == 403

    rd = signed_in(console_keys["read"])
    out = rd.client.post("/sign-out", data={"csrf_token": rd.csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/sign-in"
    assert rd.client.get("/", follow_redirects=False).status_code == 303


def test_a_post_without_the_csrf_token_or_with_another_sessions_token_is_403(
    console_server, console_keys, signed_in, make_match
):
    match = make_match(auto_dispatch_listener=True)
    op = signed_in(console_keys["operator"])
    other = signed_in(create_key(name="other", scope=Scope.OPERATOR)[1])
    url = f"/matches/{match.id}/auto-dispatch"
    assert op.client.post(url, data={"on": "0"}).status_code == 403
    assert op.client.post(url, data={"on": "0", "csrf_token": other.csrf}).status_code == 403
    assert op.client.post(url, data={"on": "0"}, headers={"X-CSRF-Token": "nope"}).status_code == 403
    assert op.client.post("/sign-out").status_code == 403
    from models.match import Match

    assert Match.get_by_id(match.id).auto_dispatch_listener is True
    done = op.client.post(
        url, data={"on": "0"}, headers={"X-CSRF-Token": op.csrf, "Accept": "application/json"}
    )
    assert done.status_code == 200 and done.json()["ok"] is True
    assert Match.get_by_id(match.id).auto_dispatch_listener is False


def test_a_read_session_sees_the_board_without_action_buttons_and_a_forged_post_is_403(
    console_server, console_keys, signed_in, make_match
):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    rd = signed_in(console_keys["read"])
    page = rd.client.get("/").text
    assert f'data-match-id="{match.id}"' in page
    for label in ("Start", "Force start", "Stop", "Dispatch off", "Dispatch now", "Sweep now"):
        assert f">{label}</button>" not in page
    assert "/matches/" not in re.sub(r'href="/matches/[^"]+"', "", page)  # no action form targets
    card = rd.client.get(f"/matches/{match.id}").text
    assert ">Stop</button>" not in card and "Save settings" not in card
    for path in (f"/matches/{match.id}/stop", "/board/dispatch", f"/matches/{match.id}/start"):
        assert rd.client.post(path, data={"csrf_token": rd.csrf}).status_code == 403
    assert MatchListenerRecord.get(MatchListenerRecord.match == match.id).ended_at is None


def test_the_board_reads_without_javascript_with_filters(console_server, console_keys, signed_in, make_match):
    nfl = make_match("nfl", sr_id="sr:match:111", status="inprogress")
    nhl = make_match("nhl", sr_id="sr:match:222", status="closed")
    # The server judges heartbeats with the short test intervals (stale after 1.5 s): a heartbeat
    # an hour ahead stays fresh however slow this machine is.
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=nfl.id, heartbeat_at=utcnow() + timedelta(hours=1))
    past = utcnow() - timedelta(minutes=5)
    MatchListenerRecord.create(
        id=str(uuid.uuid4()),
        match=nhl.id,
        created_at=past,
        heartbeat_at=past,
        ended_at=utcnow(),
        exit_code=15,
        exit_reason="operator_stop",
    )
    op = signed_in(console_keys["operator"])
    answer = op.client.get("/")
    assert answer.headers["x-frame-options"] == "DENY" and answer.headers["cache-control"] == "no-store"
    page = answer.text
    assert f'data-match-id="{nfl.id}" data-badge="Running"' in page
    assert f'data-match-id="{nhl.id}" data-badge="Stopped"' in page
    assert "operator_stop" in page
    active = op.client.get("/", params={"active": "1"}).text
    assert str(nfl.id) in active and f'data-match-id="{nhl.id}"' not in active
    by_league = op.client.get("/", params={"league": "nhl"}).text
    assert f'data-match-id="{nhl.id}"' in by_league and f'data-match-id="{nfl.id}"' not in by_league
    by_sr = op.client.get("/", params={"q": "111"}).text
    assert f'data-match-id="{nfl.id}"' in by_sr and f'data-match-id="{nhl.id}"' not in by_sr


def test_the_board_stream_sends_the_rows_and_ends_when_the_session_does(
    console_server, console_keys, signed_in, make_match
):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    op = signed_in(console_keys["operator"])
    with op.client.stream("GET", "/events/board") as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.iter_lines()
        seen = ""
        for line in lines:
            seen += line + "\n"
            if f'data-match-id=\\"{match.id}\\"' in line:
                break
        assert "event: board" in seen
        [operator] = [k for k in list_keys() if k.scope is Scope.OPERATOR]
        revoke_key(operator.id)
        rest = ""
        for line in lines:
            rest += line + "\n"
            if "event: signed-out" in rest:
                break
        assert "event: signed-out" in rest


def test_the_match_card_shows_runs_archive_log_settings_and_barriers(
    console_server, console_keys, signed_in, make_match, test_env
):
    match = make_match(
        "nfl", sr_id="sr:match:card", status="closed", listener_start_settings={"listener_dry_run": True}
    )
    started = utcnow() - timedelta(minutes=3)
    record = MatchListenerRecord.create(
        id=str(uuid.uuid4()),
        match=match.id,
        created_at=started,
        heartbeat_at=started,
        ended_at=started + timedelta(seconds=90),
        exit_code=3,
        exit_reason="listener_force_exit_code",
        gaps=2,
        gap_seconds=3.14,
        events_backfilled=14,
        gaps_unrecovered=1,
    )
    verification = {"ok": False, "events": 5, "missing": ["ev-9"], "extra": [], "differing": ["ev-2"]}
    counts = {"missing_count": 1, "extra_count": 0, "differing_count": 1}
    Match.update(archive_verification={**verification, **counts}, archive_verified_at=utcnow()).where(
        Match.id == match.id
    ).execute()
    archive = write_archive(test_env["DATA_DIR"], "nfl", match.sr_id, events=4)
    log = archive.parent / f"{archive.stem}.{str(record.id)[:8]}.log"
    log.write_text("first line\nlast line of the run\n")
    op = signed_in(console_keys["operator"])
    card = op.client.get(f"/matches/{match.id}").text
    assert str(match.id) in card and "listener_force_exit_code" in card
    assert 'data-exit-code="3"' in card and "90 s" in card
    assert "4 events" in card and "last line of the run" in card
    assert "listener_dry_run=true" in card
    assert "Lock holder" in card and "Attempts" in card
    assert "2 gaps, 3.1s without a stream, 14 backfilled" in card and "1 unrecovered" in card
    assert 'data-archive-ok="no"' in card and "<code>ev-9</code>" in card and "<code>ev-2</code>" in card
    # One timeline: the run's start and end (with its gaps), then an operator's act and its reason.
    assert (
        '<li data-kind="run_ended">' in card
        and "ended with exit 3 (listener_force_exit_code); 2 gaps" in card
    )
    op.client.post(
        f"/matches/{match.id}/settings",
        data={"settings": "listener_dry_run=false", "reason": "<b>live</b> now", "csrf_token": op.csrf},
    )
    card = op.client.get(f"/matches/{match.id}").text
    acts = re.findall(r'<li data-kind="act">(.*?)</li>', card, re.S)
    assert acts and "&lt;b&gt;live&lt;/b&gt; now" in acts[0] and "<b>" not in acts[0]
    board = op.client.get("/").text
    assert "2 (3.1s, 14 back, 1 unrecovered)" in board and "1 missing, 1 differing" in board
    download = op.client.get(f"/matches/{match.id}/archive")
    assert download.status_code == 200 and len(download.json()) == 4
    assert "last line" in op.client.get(f"/matches/{match.id}/runs/{record.id}/log").text
    assert op.client.get("/matches/not-a-uuid").status_code == 404


def test_settings_are_validated_like_the_cli_and_saved(console_server, console_keys, signed_in, make_match):
    from models.match import Match

    match = make_match(listener_start_settings={"listener_dry_run": True})
    op = signed_in(console_keys["operator"])
    url = f"/matches/{match.id}/settings"
    bad = op.client.post(
        url, data={"csrf_token": op.csrf, "settings": "listener_nonsense=1"}, follow_redirects=False
    )
    assert bad.status_code == 303 and "kind=error" in bad.headers["location"]
    assert "listener_nonsense" in op.client.get(bad.headers["location"]).text
    process = op.client.post(
        url,
        data={"csrf_token": op.csrf, "settings": "database_url=x"},
        headers={"Accept": "application/json"},
    )
    assert process.status_code == 422 and "refused listener setting" in process.json()["message"]
    assert Match.get_by_id(match.id).listener_start_settings == {"listener_dry_run": True}
    ok = op.client.post(
        url, data={"csrf_token": op.csrf, "settings": "listener_force_exit_code=3\n"}, follow_redirects=False
    )
    assert "kind=ok" in ok.headers["location"]
    assert Match.get_by_id(match.id).listener_start_settings == {"listener_force_exit_code": 3}


def test_publishing_pages_read_without_javascript(console_server, console_keys, signed_in):
    op = signed_in(console_keys["operator"])
    outbox = op.client.get("/outbox")
    assert outbox.status_code == 200 and "Oldest pending age" in outbox.text
    runs = op.client.get("/runs", params={"status": "failed"})
    assert runs.status_code == 200 and "No run." in runs.text
    form = op.client.get("/runs/new", params={"job": "fail"}).text
    assert 'name="param.exit_code"' in form and 'type="number"' in form and 'max="255"' in form
    missing = op.client.get("/actions", params={"tracking_id": str(uuid.uuid4())})
    assert missing.status_code == 404 and "no activity action" in missing.text


def test_run_a_job_publishes_a_run_from_the_generated_form(
    console_server, console_keys, signed_in, fresh_queues
):
    op = signed_in(console_keys["operator"])
    bad = op.client.post(
        "/runs", data={"csrf_token": op.csrf, "job": "fail", "param.exit_code": "999"}, follow_redirects=False
    )
    assert "kind=error" in bad.headers["location"]
    done = op.client.post(
        "/runs", data={"csrf_token": op.csrf, "job": "fail", "param.exit_code": "3"}, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/runs/")
    page = op.client.get(done.headers["location"]).text
    assert 'data-status="queued"' in page and '"exit_code": 3' in page
    run_id = done.headers["location"].split("?")[0].rsplit("/", 1)[1]
    cancel = op.client.post(
        f"/runs/{run_id}/cancel", data={"csrf_token": op.csrf}, headers={"Accept": "application/json"}
    )
    assert cancel.status_code == 200 and "skipped" in cancel.json()["message"]
    assert 'data-status="skipped"' in op.client.get(f"/runs/{run_id}").text


def test_every_match_link_and_action_takes_a_uuid_sr_id(
    console_server, console_keys, signed_in, make_match, test_env
):
    """Provider ids are UUIDs: a console link naming the sr_id opens (and acts on) that match."""
    from models.match import Match

    match = make_match("nfl", sr_id=str(uuid.uuid4()), status="inprogress")
    ref = match.sr_id
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id, heartbeat_at=utcnow())
    archive = write_archive(test_env["DATA_DIR"], "nfl", ref, events=2)
    archive.with_name(f"{archive.stem}.{str(record.id)[:8]}.log").write_text("the run's own line\n")
    op = signed_in(console_keys["operator"])
    card = op.client.get(f"/matches/{ref}")
    assert card.status_code == 200 and f'data-match-id="{match.id}"' in card.text
    assert op.client.get(f"/matches/{ref}/archive").status_code == 200
    assert "the run's own line" in op.client.get(f"/matches/{ref}/runs/{record.id}/log").text
    as_json = {"X-CSRF-Token": op.csrf, "Accept": "application/json"}
    saved = op.client.post(
        f"/matches/{ref}/settings", data={"settings": "listener_dry_run=true"}, headers=as_json
    )
    assert saved.status_code == 200 and saved.json()["ok"] is True, saved.text
    assert Match.get_by_id(match.id).listener_start_settings == {"listener_dry_run": True}
    stopped = op.client.post(f"/matches/{ref}/stop", data={"reason": "drill"}, headers=as_json)
    assert stopped.status_code == 200 and stopped.json()["ok"] is True, stopped.text
    assert MatchListenerRecord.get_by_id(record.id).exit_code == 15
    on = op.client.post(f"/matches/{ref}/auto-dispatch", data={"on": "1"}, headers=as_json)
    assert on.status_code == 200 and Match.get_by_id(match.id).auto_dispatch_listener is True
    started = op.client.post(f"/matches/{ref}/start", headers=as_json)
    assert started.status_code == 200 and started.json()["ok"] is True, started.text
    assert op.client.get(f"/matches/{uuid.uuid4()}").status_code == 404
