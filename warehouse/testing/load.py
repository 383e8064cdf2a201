"""Finding, reading and checking a project's table tests (no Spark).

Every `.yml` file under `<project>/tests/` is a test file, except in a folder that is a
project of its own (one with `layers/`, such as a test suite's fixture projects). Each
file is checked whole against `TableTestFile` and against the project: the table is
declared, every key of `given` is an input of it (a table it reads, a table its SQL
reads as a snapshot, or a topic it reads), a table's rows are objects, and test names
are unique. Every problem of every file is reported at once (`TableTestFileError`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from warehouse.spec.errors import Problem
from warehouse.spec.loader import field_path, read_yaml, validation_problems
from warehouse.spec.model import LoadedProject
from warehouse.spec.table import TableDefinition, TopicSource
from warehouse.testing.errors import NoTestsSelectedError, TableTestFileError
from warehouse.testing.model import TableTest, TableTestFile

TESTS_DIR = "tests"


@dataclass(frozen=True)
class LoadedTest:
    """A test and where it was written: `file` relative to the project, `index` in its
    `tests:` list."""

    test: TableTest
    file: str
    index: int

    @property
    def name(self) -> str:
        return self.test.name

    @property
    def table(self) -> str:
        return self.test.table


def table_test_files(project_dir: Path) -> list[Path]:
    """The project's test files, in path order."""
    folder = project_dir / TESTS_DIR
    return sorted(_yml_files(folder)) if folder.is_dir() else []


def _yml_files(folder: Path) -> Iterator[Path]:
    for child in folder.iterdir():
        if child.is_dir():
            if not (child / "layers").is_dir():
                yield from _yml_files(child)
        elif child.suffix in (".yml", ".yaml"):
            yield child


def load_tests(project: LoadedProject) -> list[LoadedTest]:
    """Every test of the project, checked; raises `TableTestFileError` with every problem."""
    out: list[LoadedTest] = []
    problems: list[Problem] = []
    for path in table_test_files(project.path):
        rel = path.relative_to(project.path).as_posix()
        data, lines, found = read_yaml(path, rel)
        problems += found
        if found:
            continue
        try:
            parsed = TableTestFile.model_validate(data if data is not None else {})
        except ValidationError as e:
            problems += validation_problems(e, data, rel, model=TableTestFile, lines=lines)
            continue
        for i, test in enumerate(parsed.tests):
            problems += [
                Problem(rel, field_path(("tests", i, *at)), message, line=lines.get(("tests", i)))
                for at, message in _problems(project, test)
            ]
            out.append(LoadedTest(test, rel, i))
    problems += _duplicate_names(out)
    if problems:
        raise TableTestFileError(problems, project=str(project.path))
    return out


def select_tests(
    tests: Sequence[LoadedTest], *, tables: Sequence[str] = (), select: Sequence[str] = ()
) -> list[LoadedTest]:
    """The tests of `tables` (all when empty) whose name matches a pattern of `select`
    (shell-style, `*` and `?`; all when empty). A selection of none is an error."""
    chosen = [
        t
        for t in tests
        if (not tables or t.table in tables)
        and (not select or any(fnmatch.fnmatchcase(t.name, p) for p in select))
    ]
    if tests and not chosen:
        asked = ", ".join(f"`{x}`" for x in [*tables, *select])
        names = ", ".join(f"`{t.name}` ({t.table})" for t in tests)
        raise NoTestsSelectedError(f"No table test matches {asked}. The project's tests: {names}.")
    return chosen


def inputs(project: LoadedProject, defn: TableDefinition) -> tuple[list[str], list[str]]:
    """The tables a test of `defn` may give rows of (the tables it reads, then those its
    SQL reads as snapshots), and the topics it reads (none for a `pattern`)."""
    src = defn.spec.source
    upstream = list(src.upstream_tables)
    static = [t for t in defn.static_tables if t in project.tables and t not in upstream]
    topics = src.topics if isinstance(src, TopicSource) else []
    return [*upstream, *static], list(topics)


def is_topic_of(defn: TableDefinition, name: str) -> bool:
    """Whether `name` is a topic `defn` reads: one it names, or one its `pattern` matches."""
    src = defn.spec.source
    if not isinstance(src, TopicSource):
        return False
    if name in src.topics:
        return True
    return src.kafka.pattern is not None and re.fullmatch(src.kafka.pattern, name) is not None


def _problems(project: LoadedProject, test: TableTest) -> Iterator[tuple[tuple, str]]:
    defn = project.tables.get(test.table)
    if defn is None:
        names = ", ".join(f"`{n}`" for n in project.tables)
        yield ("table",), f"`{test.table}` is not a table of the project (tables: {names})"
        return
    src = defn.spec.source
    if isinstance(src, TopicSource) and src.kafka.connect_schema:
        yield (
            ("table",),
            f"`{test.table}` takes its columns from its records' Connect schema "
            "(`connect_schema: true`), which only a broker gives; declare them with "
            "`schema: NAME` to test it",
        )
    yield from _same_columns(("expect", "rows"), test.expect.rows)
    if isinstance(test.expect.quarantine, list):
        yield from _same_columns(("expect", "quarantine"), test.expect.quarantine)
    tables, topics = inputs(project, defn)
    for key, items in test.given.items():
        if key in tables:
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    yield (
                        ("given", key, j),
                        f"a row of the table `{key}` is an object of its columns, not `{item!r}`",
                    )
        elif not is_topic_of(defn, key):
            can = [f"`{t}`" for t in [*tables, *topics]]
            src = defn.spec.source
            if isinstance(src, TopicSource) and src.kafka.pattern is not None:
                can.append(f"the topics matching `{src.kafka.pattern}`")
            yield (
                ("given", key),
                f"`{key}` is not an input of `{test.table}`; give one of: "
                f"{', '.join(can) or 'none (it reads nothing a test can give)'}",
            )


def _same_columns(at: tuple[Any, ...], rows: list[dict[str, Any]]) -> Iterator[tuple]:
    """Expected rows compare on the columns they list: every row lists the same ones."""
    first = list(rows[0]) if rows else []
    for j, row in enumerate(rows[1:], start=1):
        if set(row) != set(first):
            yield (
                (*at, j),
                f"lists the columns {', '.join(f'`{c}`' for c in row)}, but the first row "
                f"lists {', '.join(f'`{c}`' for c in first)}; expected rows are compared on "
                "the columns they list, so every row lists the same ones",
            )


def _duplicate_names(tests: Sequence[LoadedTest]) -> list[Problem]:
    seen: dict[str, LoadedTest] = {}
    out = []
    for t in tests:
        first = seen.setdefault(t.name, t)
        if first is not t:
            out.append(
                Problem(
                    t.file,
                    f"tests[{t.index}].name",
                    f"the test name `{t.name}` is also used in {first.file} "
                    f"(tests[{first.index}]); give each test its own name",
                )
            )
    return out
