"""Issue 35 item 4: a key name means one key, never the CLI's form; listings show who by key id."""

from __future__ import annotations

import httpx
import pytest

from api.errors import KeyNameTaken
from api.keys import Scope, create_key
from models.audit import audit_entries
from publisher.errors import TriggerValidationError
from tests.api.conftest import bearer


def test_key_names_are_unique_in_any_case(db):
    create_key(name="ci-bot", scope=Scope.READ)
    with pytest.raises(KeyNameTaken):
        create_key(name="CI-Bot", scope=Scope.OPERATOR)


@pytest.mark.parametrize("name", ["root@vm", "  ", "a\x00b", "x" * 201])
def test_a_key_name_in_the_clis_form_or_breaking_the_text_rule_is_refused(db, name):
    with pytest.raises(TriggerValidationError):
        create_key(name=name, scope=Scope.READ)


def test_the_api_answers_409_for_a_taken_name_and_422_for_user_at_host(api_server, keys):
    with httpx.Client(base_url=api_server.url, headers=bearer(keys["admin"]), timeout=30) as admin:
        assert admin.post("/v1/apikeys", json={"name": "deploy", "scope": "read"}).status_code == 201
        taken = admin.post("/v1/apikeys", json={"name": "DEPLOY", "scope": "operator"})
        assert taken.status_code == 409, taken.text
        spoof = admin.post("/v1/apikeys", json={"name": "root@vm", "scope": "read"})
        assert spoof.status_code == 422, spoof.text
        listed = admin.get("/v1/audit", params={"action": "apikey.create"}).json()["entries"]
    assert [e["who_key_id"] for e in listed] == [audit_entries(action="apikey.create")[0].who_key_id]
    assert listed[0]["who_key_id"] is not None
