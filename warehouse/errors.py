"""The root of every error the framework raises on purpose.

Each subpackage defines its own errors in its `errors.py`, deriving from
`WarehouseError`; they carry structured attributes (`table`, `path`, `field`)
so that the CLI can print them without a traceback; `known_errors` adds the roots of
the `streams` errors, whose messages are meant for users too. `root_cause_line` turns an
error that came through Spark into the one line a message quotes.
"""

from __future__ import annotations

import re
import sys


class WarehouseError(Exception):
    """Base class of the framework's errors. `exit_code` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.table = table

    def __str__(self) -> str:
        return self.message


STREAMS_ERRORS: tuple[tuple[str, str], ...] = (
    ("streams.kafka.errors", "KafkaStreamError"),
    ("streams.delta.errors", "DeltaStreamError"),
    ("streams.cdc.errors", "CdcError"),
    ("streams.landing.errors", "LandingError"),
    ("streams.broker.errors", "BrokerError"),
    ("streams.broker.launcher", "BrokerStartError"),
)
"""The roots of the `streams` errors (module, class): `streams` never imports `warehouse`,
so they do not derive from `WarehouseError`; their messages are meant for users too."""


def known_errors() -> tuple[type[BaseException], ...]:
    """Errors with a message meant for users: `WarehouseError` and the `streams` roots whose
    module is loaded (an error of a module never imported cannot have been raised, and
    importing `streams.kafka` for the check alone would cost the CLI pyspark's import)."""
    kinds: list[type[BaseException]] = [WarehouseError]
    for module, name in STREAMS_ERRORS:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            kinds.append(kind)
    return tuple(kinds)


_EXC_LINE = re.compile(
    r"^\s*(?:Caused by: |: )?([A-Za-z_][\w.$]*(?:Error|Exception|Failed)): (.+)$"
)
"""`SomeError: message` of a Python traceback, and a JVM stack trace's own forms of it as
Py4J quotes them (`: org...SparkException: ...` first, `Caused by: ...` for each cause)."""


def root_cause_line(error: BaseException | str) -> str:
    """The innermost `SomeError: message` line of an error's (JVM-wrapped) traceback text,
    else its first line; for an exception with no text, its type name."""
    text = str(error)
    found = [
        m
        for m in (_EXC_LINE.match(line) for line in text.splitlines())
        if m and not m.group(1).startswith(("pyspark.", "py4j."))
    ]
    if found:
        name, message = found[-1].group(1), found[-1].group(2)
        return f"{name.rsplit('.', 1)[-1]}: {message.replace(' SQLSTATE: 38000', '').strip()}"
    stripped = text.strip()
    if stripped:
        return stripped.splitlines()[0]
    return type(error).__name__ if isinstance(error, BaseException) else "unknown error"
