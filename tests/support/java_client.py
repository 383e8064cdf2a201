"""The Java client (`org.apache.kafka:kafka-clients`) as a third client of the oracle scenarios.

The scenarios are Java sources under `tests/support/java/oracle/`, compiled once per test
session against the cached Apache Kafka jars (see `tests/support/apache_kafka.py`, which
include `kafka-clients` and Jackson) and run as `java -cp <classes>:<jars> oracle.Main
<scenario> <bootstrap> [args]`: one JVM per scenario group and broker, which prints what
the client observed as one JSON object (byte arrays as base64, exceptions by class name).

Compiling needs a Java compiler: `javac` from `$JAVA_HOME` or `PATH`, else the
`jdk.compiler` module of the `java` found (Debian's JRE packages ship it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.apache_kafka import ApacheKafkaError, cached_classpath

SOURCES = Path(__file__).parent / "java" / "oracle"
MAIN = "oracle.Main"
JVM_OPTIONS = (
    "-Xmx256m",
    "-Xms32m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
    # the clients log through slf4j-simple to stderr; only the JSON on stdout is read
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
)


class JavaClientError(Exception):
    """The scenarios did not compile, or a scenario run failed; the message has the output."""


def b64(text: str | bytes) -> str:
    """How the runner prints a byte array: `b64("v1")` is the JSON value of the bytes b"v1"."""
    data = text.encode() if isinstance(text, str) else text
    return base64.b64encode(data).decode()


def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def _compiler() -> list[str]:
    javac = _tool("javac")
    if javac:
        return [javac]
    java = _tool("java")
    if java:
        modules = subprocess.run(
            [java, "--list-modules"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
        if "jdk.compiler@" in modules:
            return [java, "-m", "jdk.compiler/com.sun.tools.javac.Main"]
    raise JavaClientError(
        "no Java compiler found: neither `javac` (in $JAVA_HOME/bin or on PATH) nor a `java` "
        "with the `jdk.compiler` module. Install a JDK >= 17 (Debian/Ubuntu: "
        "`apt-get install openjdk-17-jdk-headless`) or point JAVA_HOME at one."
    )


@dataclass(frozen=True)
class JavaClient:
    """The compiled scenarios; `run` starts one JVM per call."""

    classes: Path
    classpath: str

    @classmethod
    def compile(cls, out_dir: Path) -> JavaClient:
        _version, classpath = cached_classpath()
        sources = sorted(str(p) for p in SOURCES.glob("*.java"))
        out_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [*_compiler(), "-encoding", "UTF-8", "-d", str(out_dir), "-cp", classpath, *sources],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise JavaClientError(
                f"compiling the Java scenarios in `{SOURCES}` failed with status "
                f"{proc.returncode}:\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
            )
        return cls(out_dir, classpath)

    def run(self, scenario: str, bootstrap: str, *args: str, timeout: float = 300) -> Any:
        """What scenario group `scenario` observed on `bootstrap`, parsed from its JSON."""
        java = _tool("java") or "java"
        cmd = [
            java,
            *JVM_OPTIONS,
            "-cp",
            f"{self.classes}{os.pathsep}{self.classpath}",
            MAIN,
            scenario,
            bootstrap,
            *args,
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise JavaClientError(
                f"Java scenario `{scenario}` on {bootstrap} did not finish within {timeout:.0f}s"
            ) from e
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise JavaClientError(
                f"Java scenario `{scenario}` on {bootstrap} exited with status "
                f"{proc.returncode}:\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-6000:]}"
            )
        return json.loads(lines[-1])


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    """The Java scenarios (tests/support/java/oracle), compiled once for the run; a failed
    test, not a skipped one, when they cannot be compiled."""
    try:
        return JavaClient.compile(tmp_path_factory.mktemp("java-client"))
    except (ApacheKafkaError, JavaClientError) as e:
        reason = str(e)
    pytest.fail(reason, pytrace=False)
