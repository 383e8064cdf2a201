"""Read `layers/<layer>/`: YAML table files and Python modules defining `TableSpec`s.

A YAML table's SQL is `transform.sql`, `transform.sql_file` (relative to the YAML
file) or, when `transform` is absent, a sibling `<stem>.sql`. A `*.py` module in a
layer folder is imported (project folder on `sys.path`); its module-level
`TableSpec` objects are tables of that layer. No registry: only what the module
holds at module level counts, and an object found in several modules belongs to
the first (layers in order, files sorted).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from warehouse.spec.errors import Problem
from warehouse.spec.loader import error_message, field_path, read_yaml, validation_problems
from warehouse.spec.pycode import ImportProblem, import_module
from warehouse.spec.table import LAYERS, TableDefinition, TableSource, TableSpec, TopicSource

logger = logging.getLogger(__name__)

TABLE_SUFFIXES = (".yml", ".yaml")


def load_tables(project_dir: Path) -> tuple[list[TableDefinition], list[Problem]]:
    """Every table of `layers/<layer>/`: YAML files, then Python modules, layers in order."""
    folder = project_dir / "layers"
    if not folder.is_dir():
        return [], [
            Problem(
                "layers/",
                "",
                f"no `layers/` folder in `{project_dir}`; is this a warehouse project? "
                "Declare tables in `layers/<layer>/<name>.yml` (or run `warehouse init`).",
            )
        ]
    problems = _misplaced(project_dir, folder)
    tables: list[TableDefinition] = []
    for layer in LAYERS:
        layer_dir = folder / layer
        if not layer_dir.is_dir():
            continue
        files = sorted(p for s in TABLE_SUFFIXES for p in layer_dir.rglob(f"*{s}"))
        for path in files:
            table, found = _load_yaml_table(project_dir, path, layer)
            problems.extend(found)
            if table is not None:
                tables.append(table)
    seen: set[int] = set()
    for layer in LAYERS:
        layer_dir = folder / layer
        if not layer_dir.is_dir():
            continue
        for path in sorted(layer_dir.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            found_tables, found = _load_python_tables(project_dir, path, layer, seen)
            tables.extend(found_tables)
            problems.extend(found)
    return tables, problems


def _misplaced(project_dir: Path, folder: Path) -> list[Problem]:
    """Folders of `layers/` that are not layers, and table files outside a layer folder."""
    problems: list[Problem] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        rel = entry.relative_to(project_dir).as_posix()
        if entry.is_dir() and entry.name not in LAYERS:
            problems.append(
                Problem(
                    rel + "/",
                    "",
                    f"`{entry.name}` is not a layer; layer folders are "
                    f"{', '.join(f'`{layer}`' for layer in LAYERS)}. Move its tables into one.",
                )
            )
        elif entry.is_file() and entry.suffix in (*TABLE_SUFFIXES, ".py", ".sql"):
            problems.append(
                Problem(rel, "", "a table file must be inside a layer folder `layers/<layer>/`")
            )
    return problems


def _load_yaml_table(
    project_dir: Path, path: Path, layer: str
) -> tuple[TableDefinition | None, list[Problem]]:
    rel = path.relative_to(project_dir).as_posix()
    data, lines, problems = read_yaml(path, rel)
    if problems:
        return None, problems
    if data is None:
        return None, [
            Problem(rel, "", "the file is empty; a table declares `table:` and `source:`")
        ]
    if not isinstance(data, dict):
        return None, [
            Problem(
                rel, "", f"a table file is a mapping (`table: ...`), not a {type(data).__name__}"
            )
        ]
    name = data.get("table") if isinstance(data.get("table"), str) else None
    sql = sql_path = None
    transform = data.get("transform")
    sibling = path.with_suffix(".sql")
    if transform is None and sibling.exists():
        sql, sql_path = _read_text(sibling, rel, problems), sibling.relative_to(project_dir)
    elif isinstance(transform, dict) and isinstance(transform.get("sql_file"), str):
        target = (path.parent / transform["sql_file"]).resolve()
        if not target.is_file():
            problems.append(
                Problem(
                    rel,
                    "transform.sql_file",
                    f"file `{transform['sql_file']}` not found (looked for `{target}`); "
                    "the path is relative to the YAML file",
                    table=name,
                    line=lines.get(("transform", "sql_file")),
                )
            )
        else:
            sql = _read_text(target, rel, problems)
            sql_path = (
                target.relative_to(project_dir.resolve())
                if target.is_relative_to(project_dir.resolve())
                else target
            )
    elif isinstance(transform, dict) and isinstance(transform.get("sql"), str):
        sql = transform["sql"]
    if transform is not None and sibling.exists():
        logger.warning("%s: `transform` is set, so %s is not used", rel, sibling.name)
    try:
        spec = TableSpec.model_validate(data)
    except ValidationError as e:
        problems.extend(validation_problems(e, data, rel, model=TableSpec, table=name, lines=lines))
        return None, problems
    if problems:
        return None, problems
    definition = TableDefinition(
        spec=spec,
        layer=layer,  # type: ignore[arg-type]
        path=rel,
        sql=sql,
        sql_path=Path(sql_path).as_posix() if sql_path is not None else None,
    )
    return definition, []


def _read_text(path: Path, rel: str, problems: list[Problem]) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        problems.append(Problem(rel, "transform", f"cannot read `{path.name}`: {e}"))
        return None


def _load_python_tables(
    project_dir: Path, path: Path, layer: str, seen: set[int]
) -> tuple[list[TableDefinition], list[Problem]]:
    rel = path.relative_to(project_dir).as_posix()
    parts = list(path.relative_to(project_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if not all(p.isidentifier() for p in parts):
        return [], [
            Problem(
                rel,
                "",
                "the file name is not an importable module name; use letters, digits and `_`",
            )
        ]
    try:
        module = import_module(project_dir, ".".join(parts))
    except ImportProblem as e:
        cause = e.__cause__
        if isinstance(cause, ValidationError):
            return [], [
                Problem(rel, field_path(_plain_loc(err["loc"])), error_message(err, TableSpec))
                for err in cause.errors()
            ]
        return [], [Problem(rel, "", str(e))]
    tables = []
    problems: list[Problem] = []
    for attr, value in vars(module).items():
        if isinstance(value, TableSpec) and id(value) not in seen:
            seen.add(id(value))
            sql, sql_path, problem = _python_sql(project_dir, path, value)
            if problem is not None:
                problems.append(problem)
                continue
            tables.append(
                TableDefinition(
                    spec=value,
                    layer=layer,  # type: ignore[arg-type]
                    path=rel,
                    sql=sql,
                    sql_path=sql_path,
                )
            )
            logger.debug("%s: table %s defined in Python as `%s`", rel, value.table, attr)
    return tables, problems


def _python_sql(
    project_dir: Path, path: Path, spec: TableSpec
) -> tuple[str | None, str | None, Problem | None]:
    """The SQL of a Python-defined table; `sql_file` is relative to the module's folder."""
    t = spec.transform
    if t is None or t.sql_file is None:
        return (t.sql if t else None), None, None
    target = (path.parent / t.sql_file).resolve()
    if not target.is_file():
        rel = path.relative_to(project_dir).as_posix()
        return (
            None,
            None,
            Problem(
                rel,
                "transform.sql_file",
                f"file `{t.sql_file}` not found (looked for `{target}`); "
                "the path is relative to the module's folder",
                table=spec.table,
            ),
        )
    root = project_dir.resolve()
    shown = target.relative_to(root).as_posix() if target.is_relative_to(root) else str(target)
    return target.read_text(encoding="utf-8"), shown, None


def _plain_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    tags = {"append", "upsert", "scd2", TopicSource.union_tag, TableSource.union_tag}
    return tuple(
        el for el in loc if el not in tags and not str(el).startswith(("literal[", "dict["))
    )
