"""Issue 35 item 6: the CLI and the console hold per-run settings to the API's numeric bounds."""

from __future__ import annotations

import pytest

from lifecycle.errors import ListenerStartSettingsError
from lifecycle.listener_run import validate_listener_settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [1e308, "1e308", 2e9, float("inf")])
def test_a_number_past_the_apis_bound_is_refused_on_every_surface(value):
    with pytest.raises(ListenerStartSettingsError, match="listener_connect_timeout_seconds"):
        validate_listener_settings({"listener_connect_timeout_seconds": value}, source="--setting")


def test_a_number_within_the_bound_is_kept():
    validate_listener_settings({"listener_connect_timeout_seconds": 5}, source="--setting")
