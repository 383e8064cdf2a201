"""One client connection: frames are received straight into their own buffers.

`ClientConnection` is an `asyncio.BufferedProtocol`. Small frames (requests
other than big produces) are parsed out of a fixed 64 KiB receive buffer; a
frame that does not fit gets a buffer of its exact size and the kernel writes
the rest of it there directly, so a megabyte of produced records is copied once
(by kio, into the request entity) between the socket and the segment file.

Responses go out as `BrokerContext.dispatch` encoded them: buffers through the
transport, record sets left in segment files (`FileRecords`, from fetches)
with `loop.sendfile`, which hands the file ranges to the kernel (`os.sendfile`)
once the transport's buffer has drained, so fetched bytes never enter Python.

Requests of one connection are handled one at a time, in order, by a task per
connection (Kafka mutes a channel while a request is in flight); frames that
arrive meanwhile are queued, and reading pauses when the queue holds more than
`_MAX_QUEUED` bytes. A frame is only dispatched once complete, so a client that
disconnects mid-request leaves nothing behind. A bad size prefix closes the
connection with a log line naming the peer and the reason.

What a client can make the broker hold is bounded with Kafka's settings. A size prefix
over the cap closes the connection before anything is allocated: the cap is
`sasl.server.max.receive.size` (512 KiB) while SASL authentication has not completed,
`socket.request.max.bytes` after it (or without SASL). A large frame's buffer grows with
the bytes that arrive (`_GROWTH`), never to the announced size up front: a size
prefix alone costs 64 KiB. A connection over `max.connections` or
`max.connections.per.ip` is closed once accepted (`ConnectionQuotas`), and one with no
request in flight that has received and sent nothing for `connections.max.idle.ms` is
closed, as Kafka's selector expires idle connections.

Concurrency: all methods run on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import time
from typing import Any

from streams.broker.config import Listener
from streams.broker.context import BrokerContext
from streams.broker.extension import ANONYMOUS, Connection
from streams.broker.protocol import FrameError, frame_size
from streams.broker.security.tls import peer_principal
from streams.broker.storage import FileRecords

logger = logging.getLogger(__name__)

__all__ = ["ClientConnection"]

_RECEIVE_BUFFER = 64 * 1024
_MAX_QUEUED = 8 * 1024 * 1024
_SOCKET_BUFFER = 4 * 1024 * 1024
_WRITE_HIGH_WATER = 1024 * 1024
# A frame larger than the receive buffer gets a buffer of its own that holds at most
# `_GROWTH` times what has arrived of the frame (at least the receive buffer's size), and
# doubles as it fills. A client's produce of up to 1 MB (librdkafka's and the Java
# client's default limits) arrives with a full receive buffer behind its size prefix, so
# it gets its exact size at once and is never copied; a size prefix alone costs 64 KiB,
# not the size it announces.
_GROWTH = 16


class _ShortSendError(Exception):
    """A record set could not be sent whole; the connection is closed."""


def _tune_socket(transport: asyncio.BaseTransport) -> None:
    """Large kernel buffers: a multi-megabyte fetch response leaves in a few sends."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ClientConnection(asyncio.BufferedProtocol):
    """Receive frames, hand them to `BrokerContext.dispatch` in order, write the answers."""

    def __init__(self, broker: BrokerContext, listener: Listener) -> None:
        self._broker = broker
        config = broker.config
        self._max_bytes = config.socket_request_max_bytes
        self._max_bytes_unauthenticated = config.sasl_server_max_receive_size
        self._idle_s = (
            config.connections_max_idle_ms / 1000 if config.connections_max_idle_ms >= 0 else None
        )
        self._buf = bytearray(_RECEIVE_BUFFER)
        self._filled = 0
        self._big: bytearray | None = None  # a frame too large for _buf, being filled
        self._big_filled = 0
        self._big_size = 0  # the frame's size; the buffer grows towards it
        self._address: str | None = None  # counted in the broker's ConnectionQuotas
        self._active_at = time.monotonic()  # last byte received or answer written
        self._busy = False  # a request is being handled or answered
        self._idle_timer: asyncio.TimerHandle | None = None
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        self._queued = 0
        self._reading_paused = False
        self._arrived = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._eof = False
        self._lost = False
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self.connection = Connection(peer="?", listener=listener)

    # -- asyncio protocol callbacks --------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peername = transport.get_extra_info("peername")
        self.connection.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        address = str(peername[0]) if peername else "?"
        refused = self._broker.connection_quotas.acquire(address)
        if refused is not None:
            logger.info("rejected connection %s: %s", self.connection.peer, refused)
            self._lost = True
            transport.close()
            return
        self._address = address
        if self.connection.listener.tls and not self.connection.listener.sasl:
            # an SSL listener's client is the subject of the certificate it presented
            self.connection.principal = peer_principal(transport) or ANONYMOUS
            logger.info(
                "connection %s on listener %s is %s",
                self.connection.peer,
                self.connection.listener.name,
                self.connection.principal,
            )
        _tune_socket(transport)
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._broker.register_connection(self._task)
        if self._idle_s is not None:
            self._idle_timer = loop.call_later(self._idle_s, self._expire_if_idle)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        return memoryview(self._buf)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._active_at = time.monotonic()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                # kio only reads read-only buffers: a read-only view, not a copy
                self._push(memoryview(self._big).toreadonly())
                self._big = None
            elif self._big_filled == len(self._big):
                grown = bytearray(min(self._big_size, 2 * len(self._big)))
                grown[: self._big_filled] = self._big
                self._big = grown
            return
        self._filled += nbytes
        try:
            self._split_frames()
        except FrameError as e:
            logger.warning("closing connection %s: %s", self.connection.peer, e)
            self._close(abort=True)

    def eof_received(self) -> bool:
        # keep the transport open: answers to requests already received still go out
        self._eof = True
        self._arrived.set()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._arrived.set()
        self._writable.set()
        self._big = None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._address is not None:
            self._broker.connection_quotas.release(self._address)
            self._address = None

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- idle expiry -------------------------------------------------------------------
    def _expire_if_idle(self) -> None:
        """Close the connection once idle for `connections.max.idle.ms` (Kafka's selector
        closes such connections); otherwise look again when it could first be."""
        self._idle_timer = None
        if self._lost or self._idle_s is None:
            return
        idle_for = time.monotonic() - self._active_at
        if not self._busy and idle_for >= self._idle_s:
            logger.info(
                "closing connection %s: idle for %.0f ms (connections.max.idle.ms=%.0f)",
                self.connection.peer,
                idle_for * 1000,
                self._idle_s * 1000,
            )
            self._close(abort=False)
            return
        wait = self._idle_s if self._busy else self._idle_s - idle_for
        self._idle_timer = asyncio.get_running_loop().call_later(wait, self._expire_if_idle)

    # -- framing -----------------------------------------------------------------------
    def _frame_cap(self) -> int:
        """The largest frame this connection may send now: before SASL authentication has
        completed, Kafka's `sasl.server.max.receive.size`; after it (or without SASL),
        `socket.request.max.bytes`."""
        if self._broker.extension.requires_authentication(self.connection):
            return self._max_bytes_unauthenticated
        return self._max_bytes

    def _split_frames(self) -> None:
        buf, pos, end = self._buf, 0, self._filled
        with memoryview(buf) as view:
            while end - pos >= 4:
                size = frame_size(view[pos : pos + 4], max_bytes=self._frame_cap())
                if end - pos - 4 >= size:
                    self._push(bytes(view[pos + 4 : pos + 4 + size]))
                    pos += 4 + size
                    continue
                if size + 4 > len(buf):
                    # the rest of this frame goes straight into its own buffer, which
                    # grows with what arrives (`buffer_updated`), not to `size` at once
                    have = end - pos - 4
                    big = bytearray(min(size, max(_RECEIVE_BUFFER, _GROWTH * have)))
                    big[:have] = view[pos + 4 : end]
                    self._big, self._big_filled, self._big_size = big, have, size
                    pos = end
                break
        rest = end - pos
        if pos and rest:
            buf[:rest] = buf[pos:end]  # at most one partial frame under 64 KiB
        self._filled = rest

    def _push(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        self._arrived.set()
        if self._queued > _MAX_QUEUED and not self._reading_paused and self._transport:
            self._transport.pause_reading()
            self._reading_paused = True

    def _pop(self) -> bytes | memoryview:
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._reading_paused and self._queued <= _MAX_QUEUED // 2 and self._transport:
            self._transport.resume_reading()
            self._reading_paused = False
        return frame

    # -- the request loop ------------------------------------------------------------------
    async def _run(self) -> None:
        peer = self.connection.peer
        try:
            while True:
                while not self._frames:
                    if self._lost or self._eof:
                        return
                    self._arrived.clear()
                    await self._arrived.wait()
                self._busy = True
                try:
                    await self._serve(self._pop())
                finally:
                    self._busy = False
                    self._active_at = time.monotonic()
                if self.connection.close_after_ms is not None and not self._lost:
                    # the client reads the answer before it sees the connection end
                    await asyncio.sleep(self.connection.close_after_ms / 1000)
                    logger.info("closing connection %s after its last answer", peer)
                    return
        except FrameError as e:
            logger.warning("closing connection %s: %s", peer, e)
        except (ConnectionError, _ShortSendError) as e:
            logger.info("closing connection %s while sending a fetch response: %s", peer, e)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("closing connection %s: internal error while serving it", peer)
        finally:
            self._broker.unregister_connection(asyncio.current_task())  # type: ignore[arg-type]
            self._close(abort=False)

    async def _serve(self, frame: bytes | memoryview) -> None:
        """Handle one request and write its answer (long-polls and fsyncs included)."""
        chunks = await self._broker.dispatch(self.connection, frame)
        if chunks is None or self._lost:
            return
        transport = self._transport
        assert transport is not None
        try:
            for chunk in chunks:
                if isinstance(chunk, FileRecords):
                    await self._send_file(transport, chunk)
                else:
                    transport.write(chunk)
        finally:
            for chunk in chunks:
                if isinstance(chunk, FileRecords):
                    chunk.close()
        await self._writable.wait()

    async def _send_file(self, transport: asyncio.Transport, records: FileRecords) -> None:
        loop = asyncio.get_running_loop()
        for r in records.ranges:
            if self._lost or transport.is_closing():
                raise ConnectionError("connection closed")
            with open(r.fd, "rb", buffering=0, closefd=False) as file:
                sent = await loop.sendfile(transport, file, r.position, r.size)
            if sent != r.size:
                # the frame's size prefix is already out: the stream cannot be repaired
                raise _ShortSendError(
                    f"segment file ended after `{sent}` of `{r.size}` bytes at position "
                    f"`{r.position}` (truncated while being sent)"
                )

    def _close(self, *, abort: bool) -> None:
        self._frames.clear()
        self._lost = True
        self._arrived.set()
        transport: Any = self._transport
        if transport is not None and not transport.is_closing():
            if abort:
                transport.abort()
            else:
                transport.close()  # flushes what is buffered, then closes
