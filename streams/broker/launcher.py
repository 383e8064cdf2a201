"""Start, find and stop broker processes (`python -m streams.broker`).

- `BrokerProcess`: a child broker owned by the caller (tests, the demo); stop it
  with `.stop()` or use it as a context manager.
- `ensure_broker(data_dir, ...)`: the `embedded` bootstrap — reuse the live broker
  serving `data_dir` (found through `<data_dir>/broker.pid`), else start one
  detached that outlives the caller; returns its bootstrap address.
- `broker_status(data_dir)` / `stop_broker(data_dir)`: for `warehouse broker status|stop`.

The broker's configs reach it on its stdin (`--config-stdin`, one JSON object), never
on its command line: a command line is readable by every user of the machine (`ps`,
`/proc/<pid>/cmdline`), and configs can hold passwords (`sasl.users`).

This module imports no server code, so it is cheap to import from the CLI.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "broker_status",
    "ensure_broker",
    "stop_broker",
    "PID_FILE",
    "PORT_FILE",
]

PID_FILE = "broker.pid"
PORT_FILE = "broker.port"
EXIT_ADDRESS_IN_USE = 3
"""The broker process's exit status when its address is taken by another process."""
INFO_FILE = "broker.json"  # written by the server: pid, host, port, bootstrap
_ENSURE_LOCK = ".ensure.lock"


class BrokerStartError(RuntimeError):
    """The broker process exited or did not listen in time; the message has its log tail."""


class BrokerAddressInUseError(BrokerStartError):
    """Another process listens on the address the broker was given (`host`, `port`)."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        super().__init__(message)
        self.host = host
        self.port = port


def _command(data_dir: Path, host: str, port: int, port_file: Path, pid_file: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streams.broker",
        "--host",
        host,
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--port-file",
        str(port_file),
        "--pid-file",
        str(pid_file),
        "--config-stdin",
    ]


def _config_json(config: Mapping[str, Any]) -> bytes:
    """The configs as the broker reads them on stdin: a JSON object of strings."""
    pairs = {
        str(key): ("true" if value else "false") if isinstance(value, bool) else str(value)
        for key, value in config.items()
    }
    return json.dumps(pairs).encode()


def _tail(path: Path | None, lines: int = 30) -> str:
    if path is None or not path.exists():
        return "(no log file)"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still "exists"; reap it if it is ours
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _connectable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class BrokerProcess:
    """A broker child process on `host:port` (0 = any free port) serving `data_dir`.

    Not thread-safe; one owner starts and stops it.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        config: Mapping[str, Any] | None = None,
        log_file: str | Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.requested_port = port
        self.config = dict(config or {})
        self.log_file = Path(log_file) if log_file else self.data_dir / "broker.log"
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("broker not started: call .start() first")
        return f"{self.host}:{self.port}"

    def listener_bootstrap(self, name: str) -> str:
        """The `host:port` of the broker's listener `name` (Kafka's `listeners`, e.g.
        `SASL_SSL`), as the running broker wrote it to `broker.json`."""
        if self.port is None:
            raise RuntimeError("broker not started: call .start() first")
        info = json.loads((self.data_dir / INFO_FILE).read_text())
        listeners = info.get("listeners") or {}
        if name not in listeners:
            raise KeyError(f"the broker has no listener `{name}`; it has {sorted(listeners)}")
        return str(listeners[name])

    def start(self, timeout: float = 30, *, detached: bool = False) -> BrokerProcess:
        """Launch the process and wait until it listens; `BrokerStartError` if it does not."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        live = broker_status(self.data_dir)
        if live is not None:
            raise BrokerStartError(
                f"data dir `{self.data_dir}` is in use by the broker at {live['bootstrap']} "
                f"(pid {live['pid']}); stop it first or use another data dir"
            )
        port_file = self.data_dir / PORT_FILE
        port_file.unlink(missing_ok=True)
        self._log = open(self.log_file, "ab")
        cmd = _command(
            self.data_dir, self.host, self.requested_port, port_file, self.data_dir / PID_FILE
        )
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=detached,
        )
        stdin = self._proc.stdin
        assert stdin is not None
        # A broker that exits before reading its configs is reported by the loop below.
        with contextlib.suppress(BrokenPipeError):
            stdin.write(_config_json(self.config))
        with contextlib.suppress(BrokenPipeError):
            stdin.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._close_log()
                if self._proc.returncode == EXIT_ADDRESS_IN_USE:
                    raise BrokerAddressInUseError(
                        f"cannot start the broker for data dir `{self.data_dir}` on "
                        f"{self.host}:{self.requested_port}: another process listens there "
                        "(another data dir's broker, say); stop it or choose another port "
                        "(0: any free one)",
                        host=self.host,
                        port=self.requested_port,
                    )
                raise BrokerStartError(
                    f"broker for data dir `{self.data_dir}` exited with status "
                    f"{self._proc.returncode} before listening; log `{self.log_file}`:\n"
                    f"{_tail(self.log_file)}"
                )
            if port_file.exists():
                text = port_file.read_text().strip()
                if text:
                    self.port = int(text)
                    return self
            time.sleep(0.05)
        self.kill()
        raise BrokerStartError(
            f"broker for data dir `{self.data_dir}` did not listen within {timeout:.0f}s; "
            f"log `{self.log_file}`:\n{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM (graceful: flush, close), SIGKILL after `timeout`; returns the exit status."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._close_log()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: no flush, no cleanup (crash tests)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> BrokerProcess:
        return self if self.port is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def broker_status(data_dir: str | Path) -> dict[str, Any] | None:
    """{pid, host, port, bootstrap, data_dir} of the live broker serving `data_dir`, else None."""
    data_dir = Path(data_dir).resolve()
    try:
        pid = int((data_dir / PID_FILE).read_text().strip())
        info = json.loads((data_dir / INFO_FILE).read_text())
    except (OSError, ValueError):
        return None
    if info.get("pid") != pid or not _alive(pid):
        return None
    host = info.get("host") or "127.0.0.1"
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if not _connectable(probe, int(info["port"])):
        return None
    return {
        "pid": pid,
        "host": host,
        "port": int(info["port"]),
        "bootstrap": info.get("bootstrap") or f"{host}:{info['port']}",
        "data_dir": str(data_dir),
    }


@contextlib.contextmanager
def _ensure_lock(data_dir: Path) -> Iterator[None]:
    fd = os.open(data_dir / _ENSURE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_broker(
    data_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30,
) -> str:
    """Bootstrap of the broker serving `data_dir`, starting a detached one if none is live.

    Safe against concurrent callers: they serialise on a lock file in `data_dir`.
    """
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    with _ensure_lock(data_dir):
        status = broker_status(data_dir)
        if status is not None:
            return str(status["bootstrap"])
        proc = BrokerProcess(data_dir, host=host, port=port, config=config)
        proc.start(timeout, detached=True)
        proc._close_log()  # the child keeps its own descriptor
        return proc.bootstrap


def stop_broker(data_dir: str | Path, *, timeout: float = 15) -> bool:
    """Stop the broker serving `data_dir` (SIGTERM, then SIGKILL); False if none was running."""
    status = broker_status(data_dir)
    if status is None:
        return False
    pid = int(status["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True
