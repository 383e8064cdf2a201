"""Dependencies point one way: warehouse -> streams; streams never imports warehouse;
streams/broker imports nothing of ours (docs/architecture.md, "The packages"). Inside
warehouse the layers point down: spec -> quality -> compile -> write -> runtime -> testing -> the
`Project` facade; no module imports a `_private` name or module of another package, nor,
inside the runtime and the write strategies, of another module (the `private_names`
contract of tests/import_contracts.py, which `make lint` runs). Checked on the source
text, like import-linter contracts, so a violation fails here before it ships."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_contracts import private_imports

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _violations(package: str, forbidden: tuple[str, ...], *, root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted((root / package).rglob("*.py")):
        for line, name in _imports(path):
            if name.split(".")[0] in forbidden or any(
                name == f or name.startswith(f + ".") for f in forbidden
            ):
                out.append(f"{path.relative_to(root)}:{line}: imports `{name}`")
    return out


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _owner(dotted: str, root: Path) -> str | None:
    """The package that owns the first `_private` part of `dotted` (a module path, or a
    module path and a name): the package containing that module or name. None when no
    part is private."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            holder = parts[:i]  # the module or package the private part is in
            if (root.joinpath(*holder) / "__init__.py").is_file():
                return ".".join(holder)
            return ".".join(holder[:-1])
    return None


def _private_violations(package: str, *, root: Path = ROOT) -> list[str]:
    """Imports of a `_private` module or name from outside the package that owns it."""
    out = []
    for path in sorted((root / package).rglob("*.py")):
        importer = _module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for dotted in targets:
                owner = _owner(dotted, root)
                if owner is not None and not (importer + ".").startswith(owner + "."):
                    out.append(f"{path.relative_to(root)}:{node.lineno}: imports `{dotted}`")
    return out


LAYERS = [
    (
        "warehouse/spec",
        (
            "warehouse.quality",
            "warehouse.compile",
            "warehouse.write",
            "warehouse.runtime",
            "warehouse.testing",
            "warehouse.project",
            "warehouse.cli",
        ),
    ),
    (
        "warehouse/quality",
        (
            "warehouse.compile",
            "warehouse.write",
            "warehouse.runtime",
            "warehouse.testing",
            "warehouse.project",
            "warehouse.cli",
        ),
    ),
    (
        "warehouse/compile",
        (
            "warehouse.write",
            "warehouse.runtime",
            "warehouse.testing",
            "warehouse.project",
            "warehouse.cli",
        ),
    ),
    (
        "warehouse/write",
        ("warehouse.runtime", "warehouse.testing", "warehouse.project", "warehouse.cli"),
    ),
    ("warehouse/runtime", ("warehouse.testing", "warehouse.project", "warehouse.cli")),
    ("warehouse/testing", ("warehouse.project", "warehouse.cli")),
]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("streams", ("warehouse",)),
        (
            "streams/broker",
            ("warehouse", "streams.kafka", "streams.delta", "streams.cdc", "streams.landing"),
        ),
        # Kafka and Delta are engines side by side; the landing path and CDC sit above them.
        ("streams/kafka", ("streams.delta", "streams.cdc", "streams.landing")),
        ("streams/delta", ("streams.kafka", "streams.cdc", "streams.landing")),
        ("streams/cdc", ("streams.landing",)),
        ("warehouse/spec", ("pyspark",)),
        *LAYERS,
    ],
)
def test_dependencies_point_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []


@pytest.mark.parametrize("package", ["warehouse", "streams"])
def test_no_private_name_crosses_a_package(package: str) -> None:
    assert _private_violations(package) == []


def test_contract_checker_detects_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import warehouse.spec\nfrom streams.kafka import x\n")
    assert [n for _, n in _imports(bad)] == ["warehouse.spec", "streams.kafka"]


@pytest.mark.parametrize(("package", "forbidden"), LAYERS)
def test_layer_rule_detects_an_upward_import(
    tmp_path: Path, package: str, forbidden: tuple[str, ...]
) -> None:
    folder = tmp_path / package
    folder.mkdir(parents=True)
    (folder / "ok.py").write_text("from warehouse.errors import WarehouseError\n")
    for i, name in enumerate(forbidden):
        (folder / f"bad{i}.py").write_text(f"from {name}.x import y\nimport {name}\n")
    found = _violations(package, forbidden, root=tmp_path)
    assert len(found) == 2 * len(forbidden)
    assert not any("ok.py" in v for v in found)


def test_private_rule_detects_a_private_import_across_packages(tmp_path: Path) -> None:
    spec = tmp_path / "warehouse" / "spec"
    runtime = tmp_path / "warehouse" / "runtime"
    for folder in (tmp_path / "warehouse", spec, runtime):
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (spec / "loader.py").write_text("def _message(): ...\n")
    (spec / "_hidden.py").write_text("x = 1\n")
    (spec / "layers.py").write_text(
        "from warehouse.spec.loader import _message\nimport warehouse.spec._hidden\n"
    )
    (runtime / "writer.py").write_text(
        "from warehouse.spec.loader import _message\n"
        "import warehouse.spec._hidden\n"
        "from warehouse.spec._hidden import x\n"
        "from warehouse.spec import _hidden\n"
        "from warehouse.spec.loader import message\n"
    )
    found = _private_violations("warehouse", root=tmp_path)
    assert [v.split(": imports ")[1] for v in found] == [
        "`warehouse.spec.loader._message`",
        "`warehouse.spec._hidden`",
        "`warehouse.spec._hidden.x`",
        "`warehouse.spec._hidden`",
    ]
    assert all(v.startswith("warehouse/runtime/writer.py") for v in found)


PRIVATE_NAMES_INSIDE = ("warehouse.runtime", "warehouse.write")


@pytest.mark.parametrize("package", ["warehouse/runtime", "warehouse/write"])
def test_no_private_name_crosses_a_module_of_the_runtime_or_the_strategies(package: str) -> None:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        found += private_imports(_module_name(path, ROOT), path.read_text(), PRIVATE_NAMES_INSIDE)
    assert found == []


def test_private_names_rule_detects_a_private_import_between_modules() -> None:
    source = (
        "from warehouse.write.context import Outcome, _observed\n"
        "from warehouse.write.context import (\n    union,\n    _held,\n)\n"
        "from .context import _cached\n"
        "from warehouse.runtime import _private_helper\n"
        "import warehouse.write._hidden\n"
        "from warehouse.write.arrow import _own\n"  # its own module: allowed
        "from warehouse.compile.program import _publish\n"  # outside: another rule's
        "from warehouse.write.context import BatchContext\n"
    )
    found = private_imports("warehouse.write.arrow", source, PRIVATE_NAMES_INSIDE)
    assert [(f.line, f.imported) for f in found] == [
        (1, "warehouse.write.context._observed"),
        (2, "warehouse.write.context._held"),
        (6, "warehouse.write.context._cached"),
        (7, "warehouse.runtime._private_helper"),
        (8, "warehouse.write._hidden"),
    ]
