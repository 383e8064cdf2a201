"""Read a project folder into specs, collecting every problem instead of stopping at one.

This module reads files: `conf/<env>.yml`, `schemas/*`, `layers/<layer>/*.yml|*.yaml`
(with a sibling `<stem>.sql` or `transform.sql_file`) and `layers/<layer>/*.py`
modules that define `TableSpec` objects at module level. Checks across tables
(graph, columns, layer order) live in `warehouse.spec.checks`.
"""

from __future__ import annotations

import difflib
import logging
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from warehouse.spec.config import (
    _VAR_RE,
    ENV_PREFIX,
    WarehouseConfig,
    env_overrides,
    resolve_config,
)
from warehouse.spec.errors import Problem
from warehouse.spec.pycode import ImportProblem, import_module
from warehouse.spec.schemas import Columns, SchemaFileError, read_schema_file
from warehouse.spec.table import LAYERS, TableDefinition, TableSpec

logger = logging.getLogger(__name__)

TABLE_SUFFIXES = (".yml", ".yaml")


# --- YAML --------------------------------------------------------------------------


def read_yaml(path: Path, rel: str) -> tuple[Any, dict[tuple[Any, ...], int], list[Problem]]:
    """Parse one YAML file: (document, {key path: line}, problems). Duplicate keys are problems."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, {}, [Problem(rel, "", f"cannot read the file: {e}")]
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        where = f" at line {line}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        return None, {}, [Problem(rel, "", f"YAML syntax error{where}: {what}", line=line)]
    lines: dict[tuple[Any, ...], int] = {}
    problems: list[Problem] = []
    if node is not None:
        _walk_nodes(node, (), lines, problems, rel)
    return data, lines, problems


def _walk_nodes(
    node: yaml.Node, at: tuple[Any, ...], lines: dict, problems: list, rel: str
) -> None:
    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            k = key.value
            line = key.start_mark.line + 1
            if k in seen:
                problems.append(
                    Problem(
                        rel,
                        field_path((*at, k)),
                        f"key `{k}` appears twice (lines {seen[k]} and {line}); "
                        "the later one would silently win. Keep one.",
                        line=line,
                    )
                )
            seen[k] = line
            _walk_nodes(value, (*at, k), lines, problems, rel)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk_nodes(item, (*at, i), lines, problems, rel)


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for el in loc:
        out += f"[{el}]" if isinstance(el, int) else (f".{el}" if out else str(el))
    return out


# --- pydantic errors -> problems ---------------------------------------------------


def validation_problems(
    error: ValidationError,
    data: Any,
    rel: str,
    *,
    model: type[BaseModel],
    table: str | None = None,
    lines: Mapping[tuple[Any, ...], int] | None = None,
) -> list[Problem]:
    """Turn pydantic's errors into one problem per field path, in the document's terms."""
    by_field: dict[tuple[Any, ...], list[str]] = {}
    for err in error.errors():
        loc = _data_loc(err["loc"], data, err["type"])
        if err["type"] == "union_tag_invalid":
            loc = (*loc, err["ctx"].get("discriminator", "").strip("'"))
        msg = _message(err, model)
        if msg not in by_field.setdefault(loc, []):
            by_field[loc].append(msg)
    out = []
    for loc, msgs in by_field.items():
        line = None
        for n in range(len(loc), -1, -1):
            line = (lines or {}).get(tuple(loc[:n]))
            if line:
                break
        message = msgs[0] if len(msgs) == 1 else "; or ".join(msgs)
        out.append(Problem(rel, field_path(loc), message, table=table, line=line))
    return out


def _data_loc(loc: tuple[Any, ...], data: Any, kind: str) -> tuple[Any, ...]:
    """Keep the parts of pydantic's location that are keys of the document (drop union tags)."""
    node, out = data, []
    for i, el in enumerate(loc):
        if isinstance(el, int) and isinstance(node, list) and 0 <= el < len(node):
            out.append(el)
            node = node[el]
        elif isinstance(node, dict) and el in node:
            out.append(el)
            node = node[el]
        elif i == len(loc) - 1 and kind == "missing":
            out.append(el)
    return tuple(out)


def _message(err: Mapping[str, Any], model: type[BaseModel]) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    loc = err["loc"]
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        key = loc[-1]
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f" Did you mean `{close[0]}`?" if close else ""
        return f"unknown key `{key}`; expected one of {', '.join(f'`{a}`' for a in allowed)}.{hint}"
    if kind == "missing":
        return f"required field `{loc[-1]}` is missing; add it"
    if kind == "union_tag_invalid":
        return (
            f"`{ctx.get('tag')}` is not a valid {ctx.get('discriminator')}; "
            f"expected one of {ctx.get('expected_tags')}"
        )
    if kind == "literal_error":
        return f"`{value}` is not allowed; expected {ctx.get('expected')}"
    if kind in ("value_error", "assertion_error"):
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    shown = value if not isinstance(value, (dict, list)) else type(value).__name__
    friendly = {
        "int_parsing": f"`{shown}` is not an integer",
        "int_type": f"`{shown}` is not an integer",
        "int_from_float": f"`{shown}` is not a whole number",
        "float_parsing": f"`{shown}` is not a number",
        "float_type": f"`{shown}` is not a number",
        "bool_parsing": f"`{shown}` is not `true` or `false`",
        "bool_type": f"`{shown}` is not `true` or `false`",
        "string_type": f"expected text, got `{shown}`",
        "list_type": f"expected a list (`[a, b]`), got `{shown}`",
        "dict_type": f"expected a mapping (`key: value`), got `{shown}`",
        "model_type": f"expected a mapping (`key: value`), got `{shown}`",
        "model_attributes_type": f"expected a mapping (`key: value`), got `{shown}`",
    }
    if kind in friendly:
        return friendly[kind]
    return f"{err['msg']} (got `{shown}`)"


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    models: list[type[BaseModel]] = [model]
    for el in loc:
        if isinstance(el, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            for name, info in m.model_fields.items():
                if el in (name, info.alias):
                    nxt.extend(_models_in(info.annotation))
        if not nxt:  # a union tag such as `upsert` in ('sink', 'upsert', 'keys')
            nxt = [m for m in models if _tag_of(m) == el] or models
        models = nxt
    names: list[str] = []
    for m in models:
        for name, info in m.model_fields.items():
            alias = info.alias or name
            if alias not in names:
                names.append(alias)
    return names


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out.extend(_models_in(arg))
    return out


def _tag_of(model: type[BaseModel]) -> Any:
    info = model.model_fields.get("mode")
    return info.default if info is not None else None


# --- conf/<env>.yml ----------------------------------------------------------------


def load_config(
    project_dir: Path,
    env: str,
    *,
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
) -> tuple[WarehouseConfig | None, list[Problem]]:
    """Read `conf/<env>.yml` under the environment and keyword overrides."""
    rel = f"conf/{env}.yml"
    path = project_dir / rel
    if not path.exists() and (project_dir / f"conf/{env}.yaml").exists():
        rel, path = f"conf/{env}.yaml", project_dir / f"conf/{env}.yaml"
    document: Any = {}
    lines: dict[tuple[Any, ...], int] = {}
    if path.exists():
        document, lines, problems = read_yaml(path, rel)
        if problems:
            return None, problems
        document = document or {}
        if not isinstance(document, dict):
            return None, [Problem(rel, "", "a config file is a mapping of settings (`key: value`)")]
    elif env != "local":
        envs = sorted(p.stem for p in (project_dir / "conf").glob("*.y*ml"))
        known = ", ".join(f"`{e}`" for e in envs) or "none"
        return None, [
            Problem(
                rel,
                "",
                f"no config for env `{env}` (configs present: {known}). "
                f"Create `{rel}` or choose another `--env`.",
            )
        ]
    unset = list(_missing_vars(document, environ, ()))
    missing = [
        Problem(
            rel,
            field_path(at),
            f"`${{{var}}}` has no value: set the environment variable `{var}` "
            f"or write `${{{var}:-default}}`",
            line=lines.get(at),
        )
        for at, var in unset
    ]
    # Go on with blanks for the unset variables so that the other problems show up too.
    environ = {**environ, **{var: "" for _, var in unset}}
    try:
        config = resolve_config(document, environ=environ, overrides=_nest(overrides))
    except ValidationError as e:
        from_env = env_overrides(environ)
        out = list(missing)
        for p in validation_problems(
            e, _merged(document, environ, overrides), rel, model=WarehouseConfig, lines=lines
        ):
            if any(p.field == m.field for m in missing):
                continue
            top = p.field.split(".")
            if _has_path(_nest(overrides), top):
                p = Problem("<overrides>", p.field, p.message)
            elif _has_path(from_env, top):
                var = ENV_PREFIX + "__".join(s.upper() for s in top)
                p = Problem("<environment>", p.field, f"{p.message} (from `{var}`)")
            out.append(p)
        return None, out
    return (None, missing) if missing else (config, [])


def _missing_vars(value: Any, environ: Mapping[str, str], at: tuple[Any, ...]) -> Iterator[tuple]:
    if isinstance(value, str):
        for m in _VAR_RE.finditer(value):
            if m.group(1) not in environ and m.group(2) is None:
                yield at, m.group(1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _missing_vars(v, environ, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _missing_vars(v, environ, (*at, i))


def _nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`kafka__bootstrap="h:9092"` → `{"kafka": {"bootstrap": "h:9092"}}`."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split("__")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _merged(document: Any, environ: Mapping[str, str], overrides: Mapping[str, Any]) -> Any:
    from warehouse.spec.config import deep_merge, interpolate

    data = interpolate(dict(document or {}), environ)
    return deep_merge(deep_merge(data, env_overrides(environ)), _nest(overrides))


def _has_path(data: Any, parts: list[str]) -> bool:
    for p in parts:
        if not isinstance(data, dict) or p not in data:
            return False
        data = data[p]
    return True


# --- schemas/ ----------------------------------------------------------------------


def load_schemas(project_dir: Path) -> tuple[dict[str, Columns], set[str], list[Problem]]:
    """`schemas/NAME.json|.ddl` → ({name: columns}, names present but invalid, problems)."""
    schemas: dict[str, Columns] = {}
    broken: set[str] = set()
    problems: list[Problem] = []
    folder = project_dir / "schemas"
    files = sorted(folder.glob("*.json")) + sorted(folder.glob("*.ddl")) if folder.is_dir() else []
    for path in files:
        rel = path.relative_to(project_dir).as_posix()
        if path.stem in schemas or path.stem in broken:
            problems.append(
                Problem(
                    rel, "", f"schema `{path.stem}` is defined twice (`.json` and `.ddl`); keep one"
                )
            )
            continue
        try:
            schemas[path.stem] = read_schema_file(path)
        except SchemaFileError as e:
            broken.add(path.stem)
            problems.append(Problem(rel, e.field, f"invalid schema: {e.message}"))
        except (OSError, UnicodeDecodeError) as e:
            broken.add(path.stem)
            problems.append(Problem(rel, "", f"cannot read the file: {e}"))
    return schemas, broken, problems


# --- layers/ -----------------------------------------------------------------------


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
        sql, sql_path = sibling.read_text(encoding="utf-8"), sibling.relative_to(project_dir)
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
            sql = target.read_text(encoding="utf-8")
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
                Problem(rel, field_path(_plain_loc(err["loc"])), _message(err, TableSpec))
                for err in cause.errors()
            ]
        return [], [Problem(rel, "", str(e))]
    tables = []
    for attr, value in vars(module).items():
        if isinstance(value, TableSpec) and id(value) not in seen:
            seen.add(id(value))
            sql = value.transform.sql if value.transform else None
            tables.append(TableDefinition(spec=value, layer=layer, path=rel, sql=sql))  # type: ignore[arg-type]
            logger.debug("%s: table %s defined in Python as `%s`", rel, value.table, attr)
    return tables, []


def _plain_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    tags = {"append", "upsert", "scd2"}
    return tuple(
        el for el in loc if el not in tags and not str(el).startswith(("literal[", "dict["))
    )
