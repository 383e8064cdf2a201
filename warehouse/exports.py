"""Public names a package exports without importing their modules until first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` (PEP 562) for the public names `exports`
    maps to their modules: each is imported on first use and kept in `namespace`, the
    package's globals."""

    def attribute(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module `{package}` has no attribute `{name}`")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*namespace, *exports})

    return attribute, names
