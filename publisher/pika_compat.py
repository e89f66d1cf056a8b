"""The pika internals kickoff's publisher relies on, in one place, checked when this module is imported.

pika's BlockingConnection waits for every publisher confirm in turn and sends each frame as its
own buffer; kickoff pipelines a batch instead (publisher.amqp). That needs pika's private API:
the channel and connection implementations behind the blocking wrappers (``_impl``), the
blocking channel's I/O wait (``_flush_output``), timers on the I/O loop (``_adapter_call_later``,
``_adapter_remove_timeout``), writing marshalled frames (``_output_marshaled_frames``,
``_body_max_length``) and the transport's send buffers and socket (``_transport._tx_buffers``,
``_sock``). Importing this module checks every one of them and raises ImportError naming the
installed pika version and the missing attribute, so a pika release that changed them fails at
start, not in the middle of a publish. Checked against pika 1.3 and 1.4.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pika
from pika.adapters.base_connection import BaseConnection
from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection
from pika.adapters.utils.io_services_utils import _AsyncTransportBase
from pika.connection import Connection

#: Methods looked up on the class.
_METHODS = (
    (BlockingChannel, "_flush_output"),
    (BaseConnection, "_adapter_call_later"),
    (BaseConnection, "_adapter_remove_timeout"),
    (Connection, "_output_marshaled_frames"),
)
#: Attributes set on the instance by the class's ``__init__`` (found among the names it stores).
_INSTANCE_ATTRIBUTES = (
    (BlockingConnection, "_impl"),
    (BlockingChannel, "_impl"),
    (Connection, "_body_max_length"),
    (BaseConnection, "_transport"),
    (_AsyncTransportBase, "_tx_buffers"),
    (_AsyncTransportBase, "_sock"),
)


def _check() -> None:
    missing = [f"{cls.__name__}.{name}" for cls, name in _METHODS if not callable(getattr(cls, name, None))]
    missing += [
        f"{cls.__name__}.{name}"
        for cls, name in _INSTANCE_ATTRIBUTES
        if name not in cls.__init__.__code__.co_names
    ]
    if missing:
        raise ImportError(
            f"pika {pika.__version__} lacks {', '.join(missing)}, which kickoff's AMQP publisher "
            "uses; install a pika version kickoff supports (see pyproject.toml)"
        )


_check()


def channel_impl(channel: BlockingChannel) -> Any:
    """The asynchronous channel behind a BlockingChannel."""
    return channel._impl


def connection_impl(connection: BlockingConnection) -> Any:
    """The asynchronous connection behind a BlockingConnection."""
    return connection._impl


def flush_until(channel: BlockingChannel, done: Callable[[], bool]) -> None:
    """Run the connection's I/O until ``done()`` is true (BlockingChannel's own wait)."""
    channel._flush_output(done)


def call_later(connection: BlockingConnection, seconds: float, callback: Callable[[], None]) -> object:
    """Run ``callback`` on the connection's I/O loop after ``seconds``; returns the timer handle."""
    return connection._impl._adapter_call_later(seconds, callback)


def remove_timeout(connection: BlockingConnection, handle: object) -> None:
    """Cancel a timer of ``call_later``."""
    connection._impl._adapter_remove_timeout(handle)


def body_max_length(connection: BlockingConnection) -> int:
    """The largest body frame the connection sends (negotiated frame size minus the frame overhead)."""
    return connection._impl._body_max_length


def write_frames(connection: BlockingConnection, data: bytes) -> None:
    """Queue already marshalled frames for sending, as one buffer."""
    connection._impl._output_marshaled_frames([data])


def coalesce_output(connection: BlockingConnection | None) -> None:
    """Join the frames queued for sending into one buffer (same bytes, same order)."""
    buffers = getattr(getattr(getattr(connection, "_impl", None), "_transport", None), "_tx_buffers", None)
    if buffers is not None and len(buffers) > 1:
        joined = b"".join(buffers)
        buffers.clear()
        buffers.append(joined)


def socket_of(connection: BlockingConnection | None) -> Any:
    """The connection's socket, or None once its transport is gone."""
    return getattr(getattr(getattr(connection, "_impl", None), "_transport", None), "_sock", None)
