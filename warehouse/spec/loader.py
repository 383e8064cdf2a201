"""Read a project folder into specs, collecting every problem instead of stopping at one.

This module reads YAML (with line numbers and duplicate keys), turns pydantic's
errors into located problems, and reads `conf/<env>.yml` and `schemas/*`. Table
files are read by `warehouse.spec.layers`; checks across tables (graph, columns,
layer order) live in `warehouse.spec.checks`.
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

from warehouse.spec.checks import mirror_problems
from warehouse.spec.config import (
    _VAR_RE,
    ENV_PREFIX,
    WarehouseConfig,
    env_overrides,
    resolve_config,
)
from warehouse.spec.errors import Problem
from warehouse.spec.schemas import Columns, SchemaFileError, read_schema_file

logger = logging.getLogger(__name__)


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
        msg = error_message(err, model)
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


def error_message(err: Mapping[str, Any], model: type[BaseModel]) -> str:
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
    """The tag of a union member: a sink's `mode`, a source's `union_tag`."""
    info = model.model_fields.get("mode")
    return info.default if info is not None else getattr(model, "union_tag", None)


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
    # What `mirror:` names needs `kafka:` as well: checked once both have loaded.
    both = [
        Problem(rel, fld, message, line=_line(lines, fld))
        for fld, message in mirror_problems(config, rel)
    ]
    if missing or both:
        return None, [*missing, *both]
    return config, []


def _line(lines: Mapping[tuple[Any, ...], int], fld: str) -> int | None:
    """The line of a dotted field (`mirror.clusters.eu`), or of the nearest one above it."""
    parts = tuple(fld.split("."))
    for n in range(len(parts), 0, -1):
        if parts[:n] in lines:
            return lines[parts[:n]]
    return None


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
