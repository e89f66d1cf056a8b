"""The guard in front of everything: oversized headers (431), unknown Hosts (400), nosniff on every answer."""

from __future__ import annotations

import threading

import httpx
import pytest

from api.edges import allowed_hosts, host_allowed, host_of
from tests.api.conftest import answers_of_each_kind

BIG_COOKIE = "kickoff_console=" + "a" * 60_000


def test_a_60_kb_cookie_is_431_and_healthz_answers_meanwhile(api_server):
    big: list[httpx.Response] = []

    def send_big() -> None:
        # A console page: the one that reads the cookie (the quadratic parser, on the event loop).
        big.append(httpx.get(api_server.url + "/", headers={"Cookie": BIG_COOKIE}, timeout=60))

    sender = threading.Thread(target=send_big)
    sender.start()
    try:
        # A deadline, not a timing: the server's event loop must be free to answer at all.
        healthz = httpx.get(api_server.url + "/healthz", timeout=5)
    finally:
        sender.join(timeout=60)
    assert healthz.status_code == 200
    [answer] = big
    assert answer.status_code == 431
    assert "API_MAX_COOKIE_BYTES" in answer.json()["error"]
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_cookie_over_8_kib_and_a_header_block_over_16_kib_are_431(api_server):
    cookie = httpx.get(api_server.url + "/", headers={"Cookie": "x=" + "a" * 8_200}, timeout=60)
    assert cookie.status_code == 431
    headers = {f"x-pad-{n}": "b" * 2_000 for n in range(9)}
    block = httpx.get(api_server.url + "/healthz", headers=headers, timeout=60)
    assert block.status_code == 431 and "API_MAX_HEADER_BYTES" in block.json()["error"]
    small = httpx.get(api_server.url + "/", headers={"Cookie": "x=" + "a" * 4_000}, timeout=60)
    assert small.status_code == 303  # an unknown session: the sign-in form


def test_every_answer_carries_nosniff_and_referrer_policy(api, api_server):
    answers = [
        *answers_of_each_kind(api, api_server),
        httpx.get(api_server.url + "/sign-in", timeout=60),
        httpx.get(api_server.url + "/static/console.js", timeout=60),
        httpx.get(api_server.url + "/metrics", timeout=60),
        httpx.get(api_server.url + "/healthz", headers={"Host": "evil.example"}, timeout=60),
    ]
    assert [a.status_code for a in answers] == [200, 202, 422, 415, 404, 401, 200, 200, 200, 400]
    for a in answers:
        assert a.headers.get("x-content-type-options") == "nosniff", a.request.url
        assert a.headers.get("referrer-policy") == "same-origin", a.request.url


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8080",
        "127.0.0.2",
        "[::2]:80",
        "",
        "127.0.0.1:1@evil",
        "localhost/x",
        "127.0.0.1:x",
    ],
)
def test_a_host_outside_api_allowed_hosts_is_400(api_server, host):
    answer = httpx.get(api_server.url + "/healthz", headers={"Host": host}, timeout=60)
    assert answer.status_code == 400
    assert answer.json() == {"error": "unknown Host header (API_ALLOWED_HOSTS)"}


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8080", "127.0.0.1:1", "[::1]:8080"])
def test_the_localhost_names_are_allowed_by_default(api_server, host):
    assert httpx.get(api_server.url + "/healthz", headers={"Host": host}, timeout=60).status_code == 200


def test_allowed_hosts_reads_the_setting_and_patterns():
    assert allowed_hosts("", "10.0.0.5") == ("localhost", "127.0.0.1", "::1", "10.0.0.5")
    patterns = allowed_hosts(" api.example.com, *.kickoff.test ,[::1]", "127.0.0.1")
    assert patterns == ("api.example.com", "*.kickoff.test", "::1")
    assert host_allowed(host_of("API.example.com:443"), patterns)
    assert host_allowed(host_of("a.kickoff.test"), patterns) and not host_allowed("kickoff.test", patterns)
    assert host_allowed(host_of("[::1]:8080"), patterns) and not host_allowed("127.0.0.1", patterns)
    assert host_allowed("anything", ("*",))


def test_docs_serve_swagger_ui_from_the_package_under_a_self_only_csp(api_server):
    page = httpx.get(api_server.url + "/docs", timeout=60)
    assert page.status_code == 200
    assert "cdn." not in page.text and "https://" not in page.text
    csp = page.headers["content-security-policy"]
    assert csp.startswith("default-src 'self'; script-src 'self' 'sha256-")
    assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0]
    for asset, media in (("swagger-ui-bundle.js", "javascript"), ("swagger-ui.css", "text/css")):
        assert f"/docs/assets/{asset}" in page.text
        answer = httpx.get(f"{api_server.url}/docs/assets/{asset}", timeout=60)
        assert answer.status_code == 200 and media in answer.headers["content-type"]
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_console_pages_have_a_default_src_self_csp(api_server):
    answer = httpx.get(api_server.url + "/sign-in", timeout=60)
    csp = answer.headers["content-security-policy"]
    assert csp.startswith("default-src 'self'") and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "<script>" not in answer.text and " style=" not in answer.text


def test_an_unexpected_error_is_500_with_nosniff_too(settings):
    from fastapi.testclient import TestClient

    from api.app import create_app

    app = create_app(settings.model_copy(update={"api_allowed_hosts": "testserver"}))

    async def boom(_request):
        raise RuntimeError("unexpected")

    app.add_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/boom")
    assert answer.status_code == 500 and answer.json()["error"] == "internal error"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "same-origin"


@pytest.mark.parametrize("freeze", [True, False])
def test_the_served_app_keeps_its_boot_heap_out_of_the_collectors_passes_a_built_one_does_not(
    settings, freeze
):
    import gc

    from fastapi.testclient import TestClient

    from api.app import create_app

    app = create_app(settings.model_copy(update={"api_allowed_hosts": "testserver"}), freeze_boot_heap=freeze)
    before = gc.get_freeze_count()
    try:
        with TestClient(app) as client:
            assert client.get("/healthz").status_code == 200
            frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()  # this test process builds many apps: nothing of it stays frozen
    assert (frozen > before) is freeze


def test_the_apps_shutdown_stops_the_history_recorder_it_started(settings):
    """A test process builds many apps: none leaves the process-wide recorder counting or flushing."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from models.history_recorder import recorder

    app = create_app(settings.model_copy(update={"api_allowed_hosts": "testserver"}))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert recorder.enabled
    assert not recorder.enabled and recorder.pending() == 0
