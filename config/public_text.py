"""What an error text says to a caller: its kind and its sentence, never where things are.

Error texts reach callers in answers (``api.errors``), in stored errors the API and the console
show (an outbox row's ``last_error``, a trade claim's or a run's ``error``) and in console notices.
``public_text`` takes out what locates a service or a file: URLs (a URL after ``SETTING=`` becomes
the setting's name), ``host:port`` addresses and pika's ``('host', port)``, RabbitMQ virtual host
names and quoted user names, and absolute file system paths (``DATA_DIR`` and any other; an API
route such as ``/v1/runs`` stays). The full text stays in the logs and the CLI, on the box.
"""

from __future__ import annotations

import re

from config.settings import URL_IN_TEXT

#: What stands in for an address or a path.
ADDRESS = "<address>"
PATH = "<path>"

#: A URL, with the setting it belongs to when named (``AMQP_URL=amqp://...``).
_URL = re.compile(r"(?:\b([A-Z][A-Z0-9_]*)=)?" + URL_IN_TEXT.pattern)
#: A path setting with its value (``DATA_DIR=/data``): the setting's name alone.
_PATH_SETTING = re.compile(r"\b([A-Z][A-Z0-9_]*(?:DIR|PATH|FILE))=\S+")
#: ``host:port``: an IPv4 address, a bracketed IPv6 address, a dotted name or localhost.
_HOST_PORT = re.compile(
    r"(?<![\w.-])(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]|localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
    r":\d{1,5}\b"
)
#: pika's, socket's and asyncio's address tuples: ``('127.0.0.1', 5672)``, ``("127.0.0.1", 5672)``.
_ADDRESS_TUPLE = re.compile(r"\(\s*(['\"])[^'\"]*\1\s*,\s*\d{1,5}\s*(?:,[^)]*)?\)")
#: A RabbitMQ virtual host named in a broker's reply (``vhost 'kickoff_x'``, ``virtual host kickoff``).
_VHOST = re.compile(r"\b(vhost|virtual host)\b\s*[=:]?\s*(?:'[^']*'|\"[^\"]*\"|[^\s,;)]+)", re.IGNORECASE)
#: A quoted user name in a broker's reply (``refused for user 'guest'``).
_USER = re.compile(r"\b(user|username|login)\b\s*[=:]?\s*(?:'[^']*'|\"[^\"]*\")", re.IGNORECASE)
#: An absolute path of two or more parts (an API route under ``/v1/`` is no path on disk).
_PATH = re.compile(r"(?<![\w.:/~-])/(?!v1/)(?:[\w.@%+~-]+/)+[\w.@%+~-]*")


def public_text(text: str | None) -> str | None:
    """``text`` without URLs, addresses, virtual host or user names or absolute paths (None stays None)."""
    if not text:
        return text
    out = _URL.sub(lambda found: found.group(1) or ADDRESS, text)
    out = _PATH_SETTING.sub(lambda found: found.group(1), out)
    out = _ADDRESS_TUPLE.sub(ADDRESS, out)
    out = _HOST_PORT.sub(ADDRESS, out)
    out = _VHOST.sub(lambda found: f"{found.group(1)} <hidden>", out)
    out = _USER.sub(lambda found: f"{found.group(1)} <hidden>", out)
    return _PATH.sub(PATH, out)
