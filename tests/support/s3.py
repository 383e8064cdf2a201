"""A real S3-API server for the object-storage tests: S3Proxy over a local folder.

`scripts/s3proxy.sh` (run by `make install`) caches S3Proxy's jar with its dependencies
under `~/.cache/spark-warehouse/s3proxy/`. `S3Server` starts it on 127.0.0.1 with its
`filesystem` backend in a temporary folder: the S3 protocol as AWS's clients speak it
(signatures, multipart uploads, conditional writes), so the tests go through the same
clients and code paths as against AWS (docs/decisions/0031 says why this server and
backend).

The test session plans the server before Spark starts (`plan`): its port and keys go
into the standard AWS variables of the test process, which the session's JVM and its
Python workers inherit, as a user's would. The server itself starts on first use (the
`s3` fixture) and stops when the session ends. Its keys are in a properties file only
(mode 0600), never on a command line.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port
from tests.support.scratch import make_scratch

VERSION = "4.1.0"
SCRIPT = "scripts/s3proxy.sh"
REGION = "us-east-1"
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class S3ServerError(Exception):
    """S3Proxy is not cached or did not start; the message says which and how to fix it."""


def jar_path() -> Path:
    cache = (
        os.environ.get("S3PROXY_CACHE") or Path.home() / ".cache" / "spark-warehouse" / "s3proxy"
    )
    return Path(cache) / f"s3proxy-{VERSION}-jar-with-dependencies.jar"


@dataclass
class S3Server:
    port: int
    access_key: str
    secret_key: str
    folder: Path
    proc: subprocess.Popen | None = None
    buckets: set[str] = field(default_factory=set)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self) -> dict[str, str]:
        """The standard AWS variables that reach this server: all a project needs."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def start(self) -> S3Server:
        if self.proc is not None:
            return self
        jar = jar_path()
        if not jar.is_file():
            raise S3ServerError(
                f"S3Proxy {VERSION} is not cached at {jar}: run `{SCRIPT}` (or `make install`)."
            )
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        props = self.folder / "s3proxy.properties"
        props.touch(mode=0o600)
        props.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.access_key}",
                    f"s3proxy.credential={self.secret_key}",
                    "jclouds.provider=filesystem",
                    f"jclouds.identity={self.access_key}",
                    f"jclouds.credential={self.secret_key}",
                    f"jclouds.filesystem.basedir={data}",
                    "",
                ]
            )
        )
        log = (self.folder / "s3proxy.log").open("w")
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-jar", str(jar), "--properties", str(props)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self._wait()
        return self

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise S3ServerError(
                    f"S3Proxy exited with {self.proc.returncode}:\n"
                    + (self.folder / "s3proxy.log").read_text()[-3000:]
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        raise S3ServerError(f"S3Proxy did not listen on {self.endpoint} within {timeout:g} s")

    def create_bucket(self, name: str) -> str:
        """Create bucket `name` (3 characters or more) and return it."""
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint,
            region=REGION,
            allow_bucket_creation=True,
        )
        fs.create_dir(name)
        self.buckets.add(name)
        return name

    def stop(self) -> None:
        """Stop the server started by `start` (by its pid)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        self.proc = None


def plan() -> S3Server:
    """A server for this test session, not started: its port and keys are chosen, and
    the standard AWS variables set in this process for the JVMs and workers it starts."""
    server = S3Server(
        port=free_port(),
        access_key=f"test-{secrets.token_hex(4)}",
        secret_key=secrets.token_hex(16),
        folder=make_scratch("s3"),
    )
    os.environ.update(server.environ())
    return server
