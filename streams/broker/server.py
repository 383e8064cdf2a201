"""The asyncio server: connections, dispatch, background tasks, shutdown.

`Broker` implements `streams.broker.context.BrokerContext`, what every handler
sees as `ctx.broker`: config, the storage `LogManager`, the extension hooks, the
advertised API versions, append notifications for long-polling fetches, and the
group flusher (`streams.broker.waiting`); it also holds the handler registry.

Concurrency contract: everything runs on one asyncio loop thread, except
`LogManager.flush_dirty()`, which the flusher runs in a worker thread (storage
allows flushing concurrently with appends) and retention/compaction, which also
run in worker threads. Connections are `streams.broker.connection.ClientConnection`
protocols: a connection's requests are handled strictly one after another through
`Broker.dispatch`; a client that disconnects mid-request leaves nothing behind
because a request is only acted on once its whole frame has arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity

from streams.broker import handlers as core_handlers
from streams.broker.config import BrokerConfig, Listener
from streams.broker.connection import ClientConnection
from streams.broker.connection_quotas import ConnectionQuotas
from streams.broker.context import Handler, RequestContext
from streams.broker.errors import BrokerError
from streams.broker.extension import BrokerExtension, Connection
from streams.broker.protocol import (
    API_VERSIONS_KEY,
    FrameError,
    encode_response_chunks,
    parse_request,
    peek_api,
)
from streams.broker.security.tls import insecure_listener_warnings, server_context
from streams.broker.storage import LogManager
from streams.broker.waiting import AppendNotifier, GroupFlusher

logger = logging.getLogger(__name__)

__all__ = ["Broker"]

_SASL_KEYS = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate


class Broker:
    """A running broker's shared state; see the module docstring for concurrency."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        logs: LogManager,
        extension: BrokerExtension | None = None,
        extra_handlers: Mapping[int, Handler] | None = None,
        extra_versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.config = config
        self.logs = logs
        self.extension = extension or BrokerExtension()
        self.handlers: dict[int, Handler] = dict(core_handlers.HANDLERS)
        self.api_versions: dict[int, tuple[int, int]] = dict(core_handlers.API_VERSIONS)
        for key, handler in (extra_handlers or {}).items():
            if key in core_handlers.HANDLERS:
                raise ValueError(
                    f"extension handler for api key `{key}` would replace a core API; "
                    "extensions may only add APIs"
                )
            if key not in (extra_versions or {}):
                raise ValueError(
                    f"extension handler for api key `{key}` has no entry in API_VERSIONS"
                )
            self.handlers[key] = handler
            self.api_versions[key] = (extra_versions or {})[key]
        self.notifier = AppendNotifier()
        self.connection_quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            overrides=config.max_connections_per_ip_overrides,
        )
        self.flusher = GroupFlusher(self.logs.flush_dirty, on_flushed=self.notifier.notify_all)
        self.port: int = config.port
        self.listener_ports: dict[str, int] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        # TLS settings are checked before anything starts: a bad one stops the broker
        contexts = {
            listener.name: server_context(self.config, listener)
            for listener in self.config.listeners
            if listener.tls
        }
        await self.extension.start()
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            server = await loop.create_server(
                lambda listener=listener: ClientConnection(self, listener),
                host=listener.host,
                port=listener.port,
                ssl=contexts.get(listener.name),
            )
            self._servers.append(server)
            self.listener_ports[listener.name] = server.sockets[0].getsockname()[1]
        self.port = self.listener_ports[self.config.listeners[0].name]
        for warning in insecure_listener_warnings(self.config.listeners):
            logger.warning("%s", warning)
        self._tasks = [
            asyncio.create_task(self._every(self.config.flush_interval_ms, self._flush_tick)),
            asyncio.create_task(
                self._every(self.config.retention_check_interval_ms, self._retention_tick)
            ),
            asyncio.create_task(
                self._every(self.config.compaction_interval_ms, self._compaction_tick)
            ),
        ]
        logger.info(
            "broker listening on %s, data dir %s",
            ", ".join(str(self.bound(listener)) for listener in self.config.listeners),
            self.config.data_dir,
        )

    def bound(self, listener: Listener) -> Listener:
        """`listener` with the port it was bound to (a configured port may be 0)."""
        port = self.listener_ports.get(listener.name, listener.port)
        return Listener(listener.name, listener.security_protocol, listener.host, port)

    def register_connection(self, task: asyncio.Task[None]) -> None:
        self._connections.add(task)

    def unregister_connection(self, task: asyncio.Task[None]) -> None:
        self._connections.discard(task)

    async def serve_until_stopped(self) -> None:
        await self._stopped.wait()

    def request_stop(self) -> None:
        self._stopped.set()

    async def close(self) -> None:
        """Stop accepting, end connections, stop background tasks, flush and close the logs."""
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._connections, *self._tasks, return_exceptions=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        try:
            await self.extension.stop()
        finally:
            try:
                self.logs.flush_dirty()
            except (BrokerError, OSError) as e:  # an offline data dir: close without the flush
                logger.error("final flush failed: %s; the next start recovers the logs", e)
            self.logs.close()
            logger.info("broker on port %d stopped; logs flushed and closed", self.port)

    async def _every(self, interval_ms: int, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("background task %s failed; retrying next interval", action)

    async def _flush_tick(self) -> None:
        # flush.ms / flush.messages policies (Kafka's log flusher); durability=sync
        # logs are flushed by produce requests through the group flusher.
        flushed = await asyncio.to_thread(self.logs.flush_due, int(time.time() * 1000))
        if flushed:
            self.notifier.notify_all()

    # Retention and compaction do file I/O proportional to the data: they run in a
    # worker thread (the storage allows it) so clients are not stalled meanwhile.
    async def _retention_tick(self) -> None:
        deleted = await asyncio.to_thread(self.logs.run_retention, int(time.time() * 1000))
        if deleted:
            logger.info("retention deleted %d segment(s)", deleted)

    async def _compaction_tick(self) -> None:
        rewritten = await asyncio.to_thread(self.logs.run_compaction, int(time.time() * 1000))
        if rewritten:
            logger.info("compaction rewrote %d segment(s)", rewritten)

    # -- requests ----------------------------------------------------------------
    async def dispatch(self, conn: Connection, frame: bytes | memoryview) -> list[Any] | None:
        """Handle one request frame; the response frame as buffers, None for no answer.

        Raises `FrameError` when the connection must be closed."""
        api_key, version, correlation_id = peek_api(frame)
        if api_key == API_VERSIONS_KEY:
            lo, hi = self.api_versions[API_VERSIONS_KEY]
            if not lo <= version <= hi:
                # librdkafka's first request is ApiVersions v3; an older broker
                # answers in v0 format so the client can fall back.
                return [
                    core_handlers.api_versions.unsupported_version_response(self, correlation_id)
                ]
        handler = self.handlers.get(api_key)
        versions = self.api_versions.get(api_key)
        if handler is None or versions is None:
            raise FrameError(f"unsupported api key `{api_key}` (version {version})")
        if not versions[0] <= version <= versions[1]:
            raise FrameError(
                f"unsupported version `{version}` of api key `{api_key}`; "
                f"this broker supports {versions[0]}..{versions[1]}"
            )
        if (
            api_key != API_VERSIONS_KEY
            and api_key not in _SASL_KEYS
            and self.extension.requires_authentication(conn)
        ):
            raise FrameError(f"api key `{api_key}` before SASL authentication completed")
        try:
            decoded = parse_request(frame, api_key, version)
        except (UnknownAPIKey, UnknownEntity) as e:
            raise FrameError(f"no codec for api key `{api_key}` v{version}: {e}") from e
        ctx = RequestContext(
            broker=self,
            connection=conn,
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
            client_id=decoded.client_id,
        )
        try:
            response = await handler(ctx, decoded.request)
        except BrokerError as e:
            raise FrameError(f"{e} (api key `{api_key}` v{version})") from e
        if response is None:
            return None
        return encode_response_chunks(correlation_id, response)
