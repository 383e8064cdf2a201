"""An import-linter contract of ours (`make lint` runs it with the others):
`private_names`, no module imports a `_private` name or module of another module
inside the packages it names.

import-linter's `private_modules` contract covers modules only, and only across
packages; the modules of the runtime and of the write strategies share a package, so
the rule there is per module: what one of them uses of another is public. Read from
the source (`ast`), so that a name in a multi-line `from ... import (...)` counts.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import grimp
from importlinter import Contract, ContractCheck, fields, output


@dataclass(frozen=True)
class PrivateImport:
    importer: str
    line: int
    imported: str


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(module: str, source: str, inside: tuple[str, ...]) -> list[PrivateImport]:
    """The imports in `source` (the text of `module`) of a private name or module of
    another module under one of the packages `inside`."""
    found = []
    package = module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [(base, a.name) for a in node.names]
        else:
            continue
        for target, name in targets:
            if target == module or not any(
                target == p or target.startswith(p + ".") for p in inside
            ):
                continue
            dotted = f"{target}.{name}" if name else target
            if any(is_private(part) for part in dotted.split(".")):
                found.append(PrivateImport(module, node.lineno, dotted))
    return found


class PrivateNamesContract(Contract):
    """Options: `containers`, the packages whose modules may not import each other's
    private names or modules."""

    type_name = "private_names"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        inside = tuple(str(c) for c in self.containers)  # type: ignore[attr-defined]
        found: list[PrivateImport] = []
        for container in inside:
            for module in sorted(graph.find_descendants(container) | {container}):
                spec = importlib.util.find_spec(module)
                if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
                    continue
                found += private_imports(module, Path(spec.origin).read_text(), inside)
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error("Private names imported from another module:", bold=False)
        output.new_line()
        for f in check.metadata["found"]:
            output.print_error(f"- {f.importer} (l.{f.line}) imports {f.imported}", bold=False)
            output.new_line()
