"""The root of every error the framework raises on purpose.

Each subpackage defines its own errors in its `errors.py`, deriving from
`WarehouseError`; they carry structured attributes (`table`, `path`, `field`)
so that the CLI can print them without a traceback. `root_cause_line` turns an
error that came through Spark into the one line a message quotes.
"""

from __future__ import annotations

import re


class WarehouseError(Exception):
    """Base class of the framework's errors. `exit_code` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.table = table

    def __str__(self) -> str:
        return self.message


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
