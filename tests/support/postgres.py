"""A real PostgreSQL server for the CDC tests: Debian's PostgreSQL 15 with logical decoding.

`scripts/ensure-test-tools.sh` (run by `make test`) installs the Debian package
`postgresql`; `Postgres` runs its `initdb` into a fresh folder and starts its `postgres`
server on 127.0.0.1 at a free port (unix socket in that folder), with `wal_level=logical`
and room for replication slots and WAL senders, as Debezium's Postgres connector needs.
Authentication is `trust`, for connections from this machine only.

PostgreSQL refuses to run as root: when the tests run as root, the server's files belong to
the unprivileged user `nobody` and its processes run as that user. The `postgres` fixture
starts one server per test module and stops it, by pid, when the module ends.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.support.processes import stop_process

BIN = Path("/usr/lib/postgresql/15/bin")
SCRIPT = "scripts/ensure-test-tools.sh"
RUN_AS = "nobody"
"""The user the server runs as when the tests run as root."""
SUPERUSER = "postgres"
DATABASE = "warehouse"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "wal_level": "logical",
    "max_replication_slots": "8",
    "max_wal_senders": "8",
    # A test server holds little and is thrown away: no fsync, small memory.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "16MB",
    "max_connections": "30",
}


class PostgresError(Exception):
    """PostgreSQL is not installed or did not start; the message says which and why."""


class Postgres:
    """One PostgreSQL server in a folder of its own under the system's temporary folder
    (the user it runs as must reach it, which a root-only pytest folder would not let).

    Not thread-safe: one owner starts and stops it. `stop()` ends the server it started,
    by pid (a fast shutdown, SIGKILL after a grace period), and removes its folder.
    """

    def __init__(self, settings: dict[str, str] | None = None):
        initdb = BIN / "initdb"
        if not initdb.is_file():
            raise PostgresError(
                f"PostgreSQL 15 is not installed: `{initdb}` does not exist. Run `{SCRIPT}` "
                "(as root on Debian it installs the package `postgresql`), or "
                "`apt-get install postgresql`."
            )
        self.settings = {**SETTINGS, **(settings or {})}
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="warehouse-postgres-"))
        self.data = self.folder / "data"
        self.log_path = self.folder / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._user: str | None = RUN_AS if os.geteuid() == 0 else None
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the test database as the superuser."""
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={DATABASE}"

    def _as_server_user(self) -> dict[str, Any]:
        if self._user is None:
            return {}
        entry = pwd.getpwnam(self._user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _run(self, args: Sequence[str]) -> None:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.folder,
            env={**os.environ, "HOME": str(self.folder), "LC_ALL": "C.UTF-8"},
            **self._as_server_user(),
        )
        if done.returncode != 0:
            raise PostgresError(
                f"`{' '.join(args)}` failed with status {done.returncode}:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )

    def start(self, timeout: float = 60) -> Postgres:
        """Create the cluster and the database `DATABASE`, start the server and wait until it
        takes connections; `PostgresError` with the log's tail otherwise."""
        self._run(
            [
                str(BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ]
        )
        options = [f"-c{k}={v}" for k, v in self.settings.items()]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [
                    str(BIN / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.folder),
                    *options,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                env={**os.environ, "HOME": str(self.folder), "LC_ALL": "C.UTF-8"},
                **self._as_server_user(),
            )
        finally:
            log.close()
        try:
            self._wait_ready(timeout)
            with self.connect(dbname="postgres") as conn:
                conn.execute(f"CREATE DATABASE {DATABASE}")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise PostgresError(
                    f"PostgreSQL exited with status {self.proc.returncode} while starting; log "
                    f"`{self.log_path}`:\n{self.tail()}"
                )
            try:
                with psycopg.connect(self._conninfo("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError as e:
                last = str(e).strip()
            time.sleep(0.2)
        raise PostgresError(
            f"PostgreSQL on 127.0.0.1:{self.port} took no connection within {timeout:.0f}s "
            f"({last}); log:\n{self.tail()}"
        )

    def _conninfo(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def connect(self, *, dbname: str = DATABASE, autocommit: bool = True) -> Any:
        """A psycopg connection (autocommit unless asked otherwise); use it in `with`."""
        import psycopg

        return psycopg.connect(self._conninfo(dbname), autocommit=autocommit)

    def rows(self, query: str) -> list[tuple]:
        """The rows of `query`, sorted (None first in each column's order)."""
        with self.connect() as conn:
            return sorted(conn.execute(query).fetchall(), key=repr)

    def columns(self, table: str) -> list[str]:
        """`table`'s column names in their order, as `SELECT *` gives them."""
        with self.connect() as conn:
            cur = conn.execute(f"SELECT * FROM {table} LIMIT 0")
            return [d.name for d in cur.description or []]

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log file)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 20) -> None:
        """A fast shutdown (SIGINT: open sessions and replication connections are ended),
        SIGKILL if the server is still there after `grace`; then remove the folder."""
        proc, self.proc = self.proc, None
        stop_process(proc, signal.SIGINT, grace)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Postgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL server (logical decoding on) for the test module; a failed test, not a
    skipped one, saying why when it cannot start."""
    try:
        server = Postgres().start()
    except PostgresError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
