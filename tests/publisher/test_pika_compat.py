"""The pika internals the publisher uses are checked at import, with an error naming the version."""

from __future__ import annotations

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection

from publisher import pika_compat


def test_the_installed_pika_has_every_internal_the_publisher_uses():
    pika_compat._check()


def test_a_pika_without_a_private_method_fails_naming_its_version_and_the_method(monkeypatch):
    monkeypatch.delattr(BlockingChannel, "_flush_output")
    with pytest.raises(ImportError, match=rf"pika {pika.__version__} lacks BlockingChannel._flush_output"):
        pika_compat._check()


def test_a_pika_whose_connection_no_longer_keeps_its_impl_fails_at_the_check(monkeypatch):
    def __init__(self, parameters=None):  # a release that renamed the attribute
        self._implementation = None

    monkeypatch.setattr(BlockingConnection, "__init__", __init__)
    with pytest.raises(ImportError, match=r"lacks BlockingConnection\._impl"):
        pika_compat._check()
