"""Apache Kafka's own command-line tools, run from the cached tools jar against any broker.

Kafka ships `bin/kafka-topics.sh` and friends as thin shell wrappers around `main` classes
of `kafka-tools`; the cached jars (see `tests/support/apache_kafka.py`) have no wrappers,
so `run` starts the class itself: `java -cp <classpath> <MainClass> --bootstrap-server B ...`.
Each call is one small JVM (256 MB heap, C1 only, serial GC): a tool runs for a second or
two and the machine is small. The first call of a tool leaves a class archive of what it
loaded (Java's `-XX:ArchiveClassesAtExit`) in the Apache Kafka cache, and later calls map
it (`-XX:SharedArchiveFile`) instead of loading those classes from the jars again.
An archive is renamed into place only after its JVM exited 0, and is named by the `java`,
the options and the class path it was made with; one the JVM refuses anyway costs nothing
but the classes' loading from the jars.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support.apache_kafka import cache_dir, cached_classpath

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
}
"""Shell wrapper name -> the class it runs (as in Kafka's `bin/`)."""

JVM_OPTIONS = (
    "-Xmx256m",
    "-Xms32m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    # The tools log through slf4j; only their own output is compared.
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
)

QUIET_ARCHIVE = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Java 17 writes a class archive's notes to stdout, which is what the tests compare."""


class KafkaToolError(Exception):
    """A tool name that is not one of `TOOLS`, or a tool that did not finish in time."""


@dataclass(frozen=True)
class ToolResult:
    command: str
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]

    def explain(self) -> str:
        return (
            f"`{self.command}` exited {self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


# JVM and client noise on stderr that says nothing about the broker's answers.
_NOISE = re.compile(
    r"^(SLF4J[:(].*|OpenJDK 64-Bit Server VM warning:.*|\s*)$",
)


def run(
    tool: str,
    args: list[str],
    bootstrap: str,
    *,
    stdin: str | None = None,
    timeout: float = 90,
    bootstrap_option: str = "--bootstrap-server",
) -> ToolResult:
    """Run `tool` (a key of `TOOLS`) with `args` against `bootstrap`; its exit code, stdout
    and stderr (stderr without JVM/slf4j notices). The tool's own exit code is returned,
    not raised: a tool refusing something is often what a scenario compares."""
    if tool not in TOOLS:
        raise KafkaToolError(f"tool `{tool}` is not known; expected one of {sorted(TOOLS)}")
    _version, classpath = cached_classpath()
    archive = _archive(TOOLS[tool], classpath)
    making = None
    if archive.exists():
        share = f"-XX:SharedArchiveFile={archive}"
    else:
        making = archive.with_name(f"{archive.name}.{uuid.uuid4().hex}.tmp")
        share = f"-XX:ArchiveClassesAtExit={making}"
    cmd = ["java", *JVM_OPTIONS, share, *QUIET_ARCHIVE, "-cp", classpath, TOOLS[tool]]
    cmd += [bootstrap_option, bootstrap, *args]
    shown = " ".join([tool, bootstrap_option, bootstrap, *args])
    proc = None
    try:
        proc = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise KafkaToolError(f"`{shown}` did not finish within {timeout:.0f}s") from e
    finally:
        if making is not None:
            if proc is not None and proc.returncode == 0 and making.exists():
                os.replace(making, archive)
            making.unlink(missing_ok=True)
    stderr = "\n".join(line for line in proc.stderr.splitlines() if not _NOISE.match(line))
    return ToolResult(shown, proc.returncode, proc.stdout, stderr)


def _archive(main_class: str, classpath: str) -> Path:
    """Where the class archive of `main_class` run by this `java` with `JVM_OPTIONS` on
    `classpath` is kept."""
    java = Path(shutil.which("java") or "java").resolve()
    st = java.stat()
    key = "\n".join([str(java), str(st.st_size), str(st.st_mtime_ns), *JVM_OPTIONS, classpath])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = cache_dir() / "tool-archives"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{main_class.rsplit('.', 1)[-1]}-{digest}.jsa"


def columns(line: str) -> dict[str, str]:
    """`Topic: t\tPartition: 0\tLeader: 1` -> {"Topic": "t", "Partition": "0", "Leader": "1"}:
    the tab-separated `Key: value` layout of `kafka-topics --describe`."""
    out: dict[str, str] = {}
    for cell in line.strip().split("\t"):
        key, sep, value = cell.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def table(text: str) -> list[dict[str, str]]:
    """The whitespace-aligned tables of `kafka-consumer-groups` and `kafka-transactions`
    as one dict per row, keyed by the header line's column names."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    if not rows:
        return []
    header, *body = rows
    return [dict(zip(header, row, strict=False)) for row in body if row != header]
