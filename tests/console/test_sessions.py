"""Console sessions and sign-in against hostile clients: idle timeout, sessions per key, Origin, throttle,
the Secure cookie and the proxy headers of `kickoff serve --proxy-headers`."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest

from api.keys import hash_key
from models.db import database
from tests.api.conftest import Server, serving
from tests.console.conftest import CSRF_IN_PAGE
from tests.waiting import wait_for

pytestmark = pytest.mark.services

#: Documentation addresses (RFC 5737): clients as a trusted proxy names them.
CLIENT = "203.0.113.7"
OTHER_CLIENT = "203.0.113.8"
BURST_CLIENT = "203.0.113.9"


@pytest.fixture(scope="module")
def proxied_server(console_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`kickoff serve --proxy-headers` trusting the tests' address (127.0.0.1) as its proxy."""
    env = {**console_env, "API_TRUSTED_PROXIES": "127.0.0.1"}
    with serving(env, tmp_path_factory.mktemp("proxied"), args=("--proxy-headers",)) as server:
        yield server


@pytest.fixture(scope="module")
def untrusting_server(
    console_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """`kickoff serve --proxy-headers` whose only trusted proxy is another address than the tests'."""
    env = {**console_env, "API_TRUSTED_PROXIES": "192.0.2.1"}
    with serving(env, tmp_path_factory.mktemp("untrusting"), args=("--proxy-headers",)) as server:
        yield server


def _age(client: httpx.Client, *, minutes: float) -> None:
    """Move the client's session's last use ``minutes`` back (instead of waiting)."""
    [token] = [v for k, v in client.cookies.items() if k.startswith("kickoff_console_")]
    database.execute_sql(
        "UPDATE console_sessions SET last_seen_at = last_seen_at - %s WHERE token_hash = %s",
        (timedelta(minutes=minutes), hash_key(token)),
    )


def _post_sign_in(server: Server, key: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        server.url + "/sign-in",
        data={"api_key": key, "next": "/"},
        headers=headers or {},
        timeout=60,
        follow_redirects=False,
    )


def test_a_session_unused_for_the_idle_timeout_is_ended_and_its_stream_too(
    console_server, console_keys, signed_in
):
    used = signed_in(console_keys["operator"])
    _age(used.client, minutes=20)
    assert used.client.get("/", follow_redirects=False).status_code == 200  # used: idle time starts again
    _age(used.client, minutes=20)
    assert used.client.get("/outbox", follow_redirects=False).status_code == 200

    idle = signed_in(console_keys["operator"])
    _age(idle.client, minutes=31)
    page = idle.client.get("/outbox", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/sign-in?next=")
    assert idle.client.get("/events/board", follow_redirects=False).status_code == 401
    assert idle.client.post("/sign-out", data={"csrf_token": idle.csrf}).status_code == 403

    # An open board does not keep its session alive: 31 idle minutes end the stream.
    watching = signed_in(console_keys["read"])
    with watching.client.stream("GET", "/events/board", timeout=60) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        wait_for(lambda: next(lines).startswith("event: board"), timeout=60, what="the first board event")
        _age(watching.client, minutes=31)
        wait_for(lambda: next(lines) == "event: signed-out", timeout=60, what="the stream to sign out")
    assert watching.client.get("/", follow_redirects=False).status_code == 303


def test_signing_in_once_more_than_the_sessions_per_key_ends_the_oldest(
    console_server, console_keys, signed_in
):
    per_key = 5  # CONSOLE_SESSIONS_PER_KEY's default
    first, *others = [signed_in(console_keys["operator"]) for _ in range(per_key)]
    reader = signed_in(console_keys["read"])  # another key's session is not counted
    assert first.client.get("/", follow_redirects=False).status_code == 200

    newest = signed_in(console_keys["operator"])
    assert first.client.get("/", follow_redirects=False).status_code == 303
    for session in (*others, newest, reader):
        assert session.client.get("/", follow_redirects=False).status_code == 200
    [[count]] = database.execute_sql("SELECT count(*) FROM console_sessions").fetchall()
    assert count == per_key + 1


def test_a_sign_in_posted_from_another_origin_is_403_and_opens_no_session(console_server, console_keys):
    key = console_keys["operator"]
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": console_server.url.replace("127.0.0.1", "localhost")},
        {"Origin": console_server.url.replace("http:", "https:")},
        {"Referer": "https://evil.example/sign-in"},
        {"Origin": "https://evil.example", "Referer": console_server.url + "/sign-in"},
    ):
        answer = _post_sign_in(console_server, key, headers)
        assert answer.status_code == 403, headers
        assert "another site" in answer.text
        assert "set-cookie" not in answer.headers
    [[count]] = database.execute_sql("SELECT count(*) FROM console_sessions").fetchall()
    assert count == 0
    log = console_server.log()
    assert "refused: Origin 'https://evil.example' is not this console's origin http://127.0.0.1:" in log
    assert "(behind a TLS proxy? serve with --proxy-headers" in log  # the https:// origin of this host

    for headers in (
        {"Origin": console_server.url},
        {"Referer": console_server.url + "/sign-in?next=/outbox"},
        {},  # not a browser (a browser sends Origin with every POST)
    ):
        assert _post_sign_in(console_server, key, headers).status_code == 303, headers


def test_refused_sign_ins_are_throttled_per_client_address_and_logged_without_the_key(
    proxied_server, console_keys
):
    limit = 10  # CONSOLE_SIGN_IN_FAILURES_PER_MINUTE's default
    wrong = [f"kk_wrong-guess-{n}" for n in range(limit)]
    for key in wrong:
        answer = _post_sign_in(proxied_server, key, {"X-Forwarded-For": CLIENT})
        assert answer.status_code == 401
    throttled = _post_sign_in(proxied_server, console_keys["operator"], {"X-Forwarded-For": CLIENT})
    assert throttled.status_code == 429
    assert 1 <= int(throttled.headers["retry-after"]) <= 61
    assert "set-cookie" not in throttled.headers

    assert (
        _post_sign_in(proxied_server, console_keys["operator"], {"X-Forwarded-For": OTHER_CLIENT}).status_code
        == 303
    )

    def logged() -> list[str]:
        return [
            line for line in proxied_server.log().splitlines() if f"console sign-in from {CLIENT} " in line
        ]

    wait_for(lambda: len(logged()) >= limit, timeout=30, what="a warning per refused sign-in")
    lines = logged()
    assert len(lines) == limit
    assert all("WARNING" in line and CLIENT in line and "not valid" in line for line in lines)
    assert "429" in lines[-1]
    log = proxied_server.log()
    assert not any(key in log for key in (*wrong, console_keys["operator"]))


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _cookie(answer: httpx.Response) -> tuple[str, set[str]]:
    """The Set-Cookie's name and its attributes (lower case, without values)."""
    first, *attrs = answer.headers["set-cookie"].split(";")
    return first.split("=", 1)[0], {a.strip().split("=")[0].lower() for a in attrs}


def test_the_cookie_is_secure_with_the_host_prefix_behind_a_trusted_tls_proxy(proxied_server, console_keys):
    https = {"X-Forwarded-Proto": "https"}
    origin = proxied_server.url.replace("http:", "https:")
    answer = _post_sign_in(proxied_server, console_keys["operator"], {**https, "Origin": origin})
    assert answer.status_code == 303
    name, attrs = _cookie(answer)
    assert name == "__Host-kickoff_console"
    assert {"secure", "httponly", "path", "samesite"} <= attrs and "domain" not in attrs
    token = answer.cookies["__Host-kickoff_console"]
    with httpx.Client(base_url=proxied_server.url, timeout=60, follow_redirects=False) as client:
        assert (
            client.get("/", headers={**https, "Cookie": f"__Host-kickoff_console={token}"}).status_code == 200
        )
        # Over HTTPS only the __Host- cookie counts (a plain one may have been set by a sibling host).
        assert client.get("/", headers={**https, "Cookie": f"kickoff_console={token}"}).status_code == 303
        out = client.post(
            "/sign-out",
            headers={**https, "Cookie": f"__Host-kickoff_console={token}"},
            data={"csrf_token": sign_in_csrf(client, https, token)},
        )
        assert out.status_code == 303
        name, attrs = _cookie(out)
        assert name == "__Host-kickoff_console" and "secure" in attrs

    # Plain HTTP on the loopback address: the plain cookie, not Secure (browsers would not send it back).
    name, attrs = _cookie(_post_sign_in(proxied_server, console_keys["operator"]))
    assert name == f"kickoff_console_{_port(proxied_server)}" and "secure" not in attrs


def sign_in_csrf(client: httpx.Client, headers: dict[str, str], token: str) -> str:
    page = client.get("/", headers={**headers, "Cookie": f"__Host-kickoff_console={token}"})
    found = CSRF_IN_PAGE.search(page.text)
    assert found, page.text
    return found.group(1)


def test_a_burst_of_concurrent_guesses_gets_no_more_than_the_limit_checked(proxied_server):
    guesses = 40

    def guess(n: int) -> int:
        return _post_sign_in(proxied_server, f"kk_burst-{n}", {"X-Forwarded-For": BURST_CLIENT}).status_code

    with ThreadPoolExecutor(max_workers=guesses) as pool:
        statuses = list(pool.map(guess, range(guesses)))
    assert set(statuses) == {401, 429}
    assert statuses.count(401) <= 10


def test_forwarded_headers_are_ignored_without_proxy_headers_or_from_an_untrusted_proxy(
    console_server, untrusting_server, console_keys
):
    for server in (console_server, untrusting_server):
        answer = _post_sign_in(server, console_keys["read"], {"X-Forwarded-Proto": "https"})
        assert answer.status_code == 303
        name, attrs = _cookie(answer)
        assert name == f"kickoff_console_{_port(server)}" and "secure" not in attrs

    # A spoofed X-Forwarded-For does not make each guess another client.
    for n in range(10):
        answer = _post_sign_in(untrusting_server, f"kk_wrong-{n}", {"X-Forwarded-For": f"198.51.100.{n}"})
        assert answer.status_code == 401
    answer = _post_sign_in(untrusting_server, console_keys["read"], {"X-Forwarded-For": "198.51.100.99"})
    assert answer.status_code == 429
    assert "console sign-in from 127.0.0.1 refused" in untrusting_server.log()


def test_the_live_boards_check_reads_every_viewers_session_in_one_statement(db, monkeypatch):
    """sessions_for: each token's live session (the same as session_for's), None for an unknown token
    or a revoked key's, read with one statement however many viewers there are."""
    from api.console.sessions import SessionPolicy, session_for, sessions_for, sign_in
    from api.keys import Scope, create_key, revoke_key
    from models.db import database as db_

    policy = SessionPolicy(lifetime=timedelta(hours=1), idle=timedelta(minutes=30), per_key=5)
    tokens = []
    for n in range(6):
        _, key = create_key(name=f"viewer-{n}", scope=Scope.OPERATOR)
        tokens.append(sign_in(key, policy=policy)[1])
    revoked_key, key = create_key(name="revoked", scope=Scope.READ)
    revoked = sign_in(key, policy=policy)[1]
    revoke_key(revoked_key.id)
    statements: list[str] = []
    real = db_.obj.execute_sql

    def counted(sql, *args, **kwargs):
        statements.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(db_.obj, "execute_sql", counted)
    found = sessions_for([*tokens, revoked, "no-such-token"], idle=policy.idle)
    monkeypatch.undo()
    assert len(statements) == 1
    assert found["no-such-token"] is None and found[revoked] is None
    for token in tokens:
        assert found[token] == session_for(token, idle=policy.idle, touch=False)
        assert found[token] is not None


def test_without_trusted_forwarded_headers_refusals_lock_the_key_not_the_address_and_an_operator_unlocks_it(
    console_server, console_env, console_keys
):
    """Issue 35: behind a proxy that sends no forwarded headers every client has the proxy's address, so
    refusals count per key: one client's guesses lock out nobody else, the same key ten times locks
    that key, and `kickoff console unlock` lifts it (audited)."""
    import json

    from api.console.throttle import account_bucket
    from models.audit import audit_entries
    from tests.api.test_trigger_http import _kickoff

    limit = 10  # CONSOLE_SIGN_IN_FAILURES_PER_MINUTE's default
    for n in range(limit + 2):
        assert _post_sign_in(console_server, f"kk_guess-{n}").status_code == 401
    assert _post_sign_in(console_server, console_keys["read"]).status_code == 303  # nobody else locked

    revoked = "kk_a-revoked-or-mistyped-key"
    for _ in range(limit):
        assert _post_sign_in(console_server, revoked).status_code == 401
    locked = _post_sign_in(console_server, revoked)
    assert locked.status_code == 429 and 1 <= int(locked.headers["retry-after"]) <= 61
    assert _post_sign_in(console_server, console_keys["operator"]).status_code == 303

    listed = _kickoff(["console", "lockouts", "--json"], console_env)
    assert listed.returncode == 0, listed.stderr
    buckets = {x["bucket"]: x["refusals"] for x in json.loads(listed.stdout)["lockouts"]}
    assert buckets == {account_bucket(revoked): limit}  # each guess was its own key: none is locked
    assert revoked not in listed.stdout

    refused = _kickoff(["console", "unlock", account_bucket(revoked)], console_env)
    assert refused.returncode == 2  # a reason is required
    unlocked = _kickoff(
        ["console", "unlock", account_bucket(revoked), "--reason", "user fixed the typo", "--json"],
        console_env,
    )
    assert unlocked.returncode == 0, unlocked.stderr
    assert json.loads(unlocked.stdout) == {"bucket": account_bucket(revoked), "cleared": limit}
    assert _post_sign_in(console_server, revoked).status_code == 401  # checked again, not 429
    [entry] = audit_entries(action="console.unlock")
    assert entry.reason == "user fixed the typo" and entry.target_id == account_bucket(revoked)
    assert entry.before == {"refusals": limit}


def test_a_session_opened_on_one_port_is_no_session_on_another_port_of_the_host(
    console_server, untrusting_server, console_keys
):
    """Issue 35: cookies are not port-scoped, so a browser sends a plain-localhost console's cookie to
    every port of the host. The cookie's name carries the port and the session its origin: another
    console on another port (same database) neither reads nor accepts it."""
    answer = _post_sign_in(console_server, console_keys["operator"])
    name, _ = _cookie(answer)
    assert name == f"kickoff_console_{_port(console_server)}"
    token = answer.cookies[name]
    other = f"kickoff_console_{_port(untrusting_server)}"
    with httpx.Client(timeout=60, follow_redirects=False) as client:
        assert client.get(console_server.url + "/", headers={"Cookie": f"{name}={token}"}).status_code == 200
        for cookie in (f"{name}={token}", f"{other}={token}"):  # as sent, and renamed for the other port
            page = client.get(untrusting_server.url + "/", headers={"Cookie": cookie})
            assert page.status_code == 303 and page.headers["location"].startswith("/sign-in"), cookie
            stream = client.get(untrusting_server.url + "/events/board", headers={"Cookie": cookie})
            assert stream.status_code == 401, cookie


def test_a_console_post_from_another_port_of_the_host_is_403_whatever_its_session_and_csrf_token(
    console_server, console_keys, signed_in, make_match
):
    match = make_match(status="inprogress")
    op = signed_in(console_keys["operator"])
    other_port = console_server.url.rsplit(":", 1)[0] + f":{_port(console_server) + 1}"
    for headers in (
        {"Origin": other_port},
        {"Referer": other_port + "/"},
        {"Origin": "https://evil.example"},
    ):
        refused = op.client.post(
            f"/matches/{match.id}/auto-dispatch",
            data={"on": "0", "csrf_token": op.csrf},
            headers=headers,
            follow_redirects=False,
        )
        assert refused.status_code == 403 and "another site or port" in refused.text, headers
    assert database.execute_sql(
        "SELECT auto_dispatch_listener FROM matches WHERE id = %s", (match.id,)
    ).fetchone()[0]
    done = op.client.post(
        f"/matches/{match.id}/auto-dispatch",
        data={"on": "0", "csrf_token": op.csrf},
        headers={"Origin": console_server.url},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    assert not database.execute_sql(
        "SELECT auto_dispatch_listener FROM matches WHERE id = %s", (match.id,)
    ).fetchone()[0]
