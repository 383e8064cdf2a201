"""Errors of a project's declarations: every problem found at load, reported at once.

`ProjectError` carries a list of `Problem`s, each naming the file (relative to the
project folder), the field inside it and what to do. The CLI prints `str(error)`
(one line per problem) and exits with `exit_code` 2, without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from warehouse.errors import WarehouseError


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in a project: `path` (file), `field` (dotted, may be empty), `message`."""

    path: str
    field: str
    message: str
    table: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}" if self.field else self.path
        return f"{where}: {self.message}"


class ProjectError(WarehouseError):
    """A project that cannot run; `problems` lists every problem found, not just the first."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem], *, project: str | None = None) -> None:
        self.problems: list[Problem] = _unique(problems)
        self.project = project
        tables = {p.table for p in self.problems if p.table}
        super().__init__(
            "\n".join(str(p) for p in self.problems) or "invalid project",
            table=next(iter(tables)) if len(tables) == 1 else None,
        )
        first = self.problems[0] if self.problems else None
        self.path = first.path if first else None
        self.field = first.field if first else None


class UnknownTableError(WarehouseError):
    """A table name asked for that the project does not declare."""

    exit_code = 2

    def __init__(self, table: str, known: Iterable[str]) -> None:
        names = ", ".join(f"`{n}`" for n in sorted(known)) or "none"
        super().__init__(
            f"Table `{table}` is not declared in the project (tables: {names}). "
            "Check the name or add `layers/<layer>/<name>.yml`.",
            table=table,
        )


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    seen: set[tuple[str, str, str]] = set()
    out: list[Problem] = []
    for p in problems:
        key = (p.path, p.field, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
