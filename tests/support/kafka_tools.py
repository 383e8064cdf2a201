"""Apache Kafka's own command-line tools, run from the cached tools jar against any broker.

Kafka ships `bin/kafka-topics.sh` and friends as thin shell wrappers around `main` classes
of `kafka-tools`; the cached jars (see `tests/support/apache_kafka.py`) have no wrappers,
so `run` starts the class itself: `java -cp <classpath> <MainClass> --bootstrap-server B ...`.
Each call is one small JVM (256 MB heap, C1 only, serial GC): a tool runs for a second or
two and the machine is small.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from tests.support.apache_kafka import cached_classpath

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
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
    cmd = ["java", *JVM_OPTIONS, "-cp", classpath, TOOLS[tool], bootstrap_option, bootstrap, *args]
    shown = " ".join([tool, bootstrap_option, bootstrap, *args])
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
    stderr = "\n".join(line for line in proc.stderr.splitlines() if not _NOISE.match(line))
    return ToolResult(shown, proc.returncode, proc.stdout, stderr)


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
