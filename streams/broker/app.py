"""Assemble and run a broker: storage, extension, server, signals, pid/port files.

`run(config, port_file=..., pid_file=...)` is what `python -m streams.broker`
calls; it returns when SIGTERM/SIGINT arrives, after a graceful shutdown (stop
accepting, end connections, flush and close every log, remove the pid file).
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from streams.broker.config import BrokerConfig, ConfigError
from streams.broker.extension import BrokerExtension
from streams.broker.server import Broker

logger = logging.getLogger(__name__)

__all__ = ["run", "build_broker", "BrokerLockedError", "INFO_FILE", "LOCK_FILE"]

INFO_FILE = "broker.json"
LOCK_FILE = ".broker.lock"
COORDINATOR_MODULE = "streams.broker.coordinator.handlers"


class BrokerLockedError(RuntimeError):
    """Another broker process already serves this data directory."""


def _load_coordinator() -> tuple[dict[int, Any], dict[int, tuple[int, int]], Any]:
    try:
        module = importlib.import_module(COORDINATOR_MODULE)
    except ModuleNotFoundError as e:
        if e.name not in (COORDINATOR_MODULE, "streams.broker.coordinator"):
            logger.exception("coordinator module %s failed to import", COORDINATOR_MODULE)
        return {}, {}, None
    except Exception:
        # A broken coordinator must not take Produce/Fetch down with it: the
        # broker runs without group/transaction APIs and says so loudly.
        logger.exception(
            "coordinator module %s failed to import; running WITHOUT consumer groups, "
            "idempotent producers, transactions and SASL",
            COORDINATOR_MODULE,
        )
        return {}, {}, None
    handlers = dict(getattr(module, "HANDLERS", {}))
    versions = dict(getattr(module, "API_VERSIONS", {}))
    return handlers, versions, getattr(module, "create_extension", None)


def build_broker(config: BrokerConfig) -> Broker:
    """Open the storage and wire the coordinator (when present) into a `Broker`."""
    from streams.broker.storage import CleanerConfig, LogConfig, LogManager

    default = LogConfig.from_kafka(config.topic_defaults)
    logs = LogManager(
        config.data_dir,
        default_config=default,
        cleaner_config=CleanerConfig.from_kafka(config.raw),
    )
    logs.load()
    handlers, versions, factory = _load_coordinator()
    if factory is None and config.raw.get("authorizer.class.name", "").strip():
        # the coordinator holds the ACLs: without it every request would be allowed
        raise ConfigError(
            "authorizer.class.name",
            config.raw["authorizer.class.name"],
            f"a broker whose coordinator ({COORDINATOR_MODULE}) loads; see the log",
        )
    broker = Broker(config, logs=logs, extra_handlers=handlers, extra_versions=versions)
    if factory is not None:
        extension = factory(broker)
        if not isinstance(extension, BrokerExtension):
            raise TypeError(
                f"{COORDINATOR_MODULE}.create_extension returned {type(extension).__name__}, "
                "expected a streams.broker.extension.BrokerExtension"
            )
        broker.extension = extension
    return broker


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _lock(data_dir: Path) -> int:
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BrokerLockedError(
            f"data dir `{data_dir}` is in use by another broker process "
            f"(lock `{data_dir / LOCK_FILE}`); stop it first or use another --data-dir"
        ) from None
    return fd


async def _serve(config: BrokerConfig, port_file: Path | None, pid_file: Path | None) -> None:
    broker = build_broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    info_path = config.data_dir / INFO_FILE
    try:
        await broker.start()
        info = {
            "pid": os.getpid(),
            "host": config.host,
            "port": broker.port,
            "bootstrap": f"{config.advertised}:{broker.port}",
            "data_dir": str(config.data_dir),
            # every listener's address by name (the first is `host`, `port`, `bootstrap`)
            "listeners": {
                listener.name: f"{config.advertised_host or listener.host}:"
                f"{broker.listener_ports[listener.name]}"
                for listener in config.listeners
            },
        }
        _write_atomic(info_path, json.dumps(info))
        if pid_file is not None:
            _write_atomic(pid_file, f"{os.getpid()}\n")
        if port_file is not None:
            _write_atomic(port_file, f"{broker.port}\n")
        await broker.serve_until_stopped()
        logger.info("shutdown requested; stopping broker on port %d", broker.port)
    finally:
        await broker.close()
        for path in (info_path, pid_file, port_file):
            if path is not None:
                path.unlink(missing_ok=True)


def run(
    config: BrokerConfig, *, port_file: Path | None = None, pid_file: Path | None = None
) -> None:
    """Run a broker in this process until SIGTERM/SIGINT."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    fd = _lock(config.data_dir)
    try:
        asyncio.run(_serve(config, port_file, pid_file))
    finally:
        os.close(fd)
