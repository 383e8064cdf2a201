"""Dependencies point one way: warehouse -> streams; streams never imports warehouse;
streams/broker imports nothing of ours (DESIGN.md §2). Checked on the source text,
like import-linter contracts, so a violation fails here before it ships."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, name in _imports(path):
            if name.split(".")[0] in forbidden or any(
                name == f or name.startswith(f + ".") for f in forbidden
            ):
                out.append(f"{path.relative_to(ROOT)}:{line}: imports `{name}`")
    return out


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("streams", ("warehouse",)),
        ("streams/broker", ("warehouse", "streams.kafka", "streams.delta", "streams.cdc")),
        ("warehouse/spec", ("pyspark",)),
    ],
)
def test_dependencies_point_one_way(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []


def test_contract_checker_detects_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import warehouse.spec\nfrom streams.kafka import x\n")
    assert [n for _, n in _imports(bad)] == ["warehouse.spec", "streams.kafka"]
