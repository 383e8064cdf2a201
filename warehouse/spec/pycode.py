"""Importing a project's own Python code (table modules in `layers/`, transform callables).

The project folder goes on `sys.path` for the import, so `layers.dws.sessions:build`
resolves inside the project. Modules of the same top-level name imported earlier
from another project folder are dropped from `sys.modules` first: two projects
loaded in one process (tests, notebooks) must not see each other's `layers`.
User code runs inside an error boundary that names the file or reference.

`sys.path`, `sys.modules` and the import system's caches are the process's, so one
import from a project folder runs at a time (`_IMPORTING`): tables whose batches run
side by side, each on its own thread, may resolve their code at once, and two
`importlib.invalidate_caches()` at once fail (both delete the same cache entry).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Our own packages are never shadowed by a project folder of the same name.
_FRAMEWORK = {"warehouse", "streams"}

# Reentrant: a project module may itself import another of the project's references.
_IMPORTING = threading.RLock()


class ImportProblem(Exception):
    """A reference that does not import; `str()` is a sentence for the user."""


def _top_level_names(project_dir: Path) -> set[str]:
    names = set()
    for entry in project_dir.iterdir():
        stem = entry.stem if entry.suffix == ".py" else entry.name
        if stem.isidentifier() and (entry.is_dir() or entry.suffix == ".py"):
            names.add(stem)
    return names - _FRAMEWORK


def _located_in(module: Any, root: Path) -> bool:
    try:
        places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", []) or [])]
    except (KeyError, TypeError):  # a namespace package whose parent is already gone
        return False
    for place in places:
        if place and Path(place).resolve().is_relative_to(root):
            return True
    return False


@contextlib.contextmanager
def project_imports(project_dir: Path) -> Iterator[None]:
    """Make the project's modules importable (and only this project's) for the block,
    which holds the process's import lock of project folders (module doc)."""
    root = project_dir.resolve()
    with _IMPORTING:
        tops = _top_level_names(root)
        foreign = [
            name
            for name, module in list(sys.modules.items())
            if name.split(".", 1)[0] in tops and not _located_in(module, root)
        ]
        for name in foreign:
            logger.debug("dropping module %s imported from another project", name)
            sys.modules.pop(name, None)
        entry = str(root)
        sys.path.insert(0, entry)
        importlib.invalidate_caches()
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def forget_modules(names: tuple[str, ...] = ("layers",)) -> None:
    """Drop imported modules under `names` so a new load imports the files as they are now
    (a notebook that edits `layers/*.py` and loads the project again sees the edit)."""
    for name in [n for n in list(sys.modules) if n.split(".", 1)[0] in names]:
        sys.modules.pop(name, None)


def import_module(project_dir: Path, module: str) -> Any:
    """Import `module` from the project; any failure becomes an `ImportProblem`."""
    with project_imports(project_dir):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and (module == e.name or module.startswith(e.name + ".")):
                raise ImportProblem(
                    f"module `{module}` not found in the project (looked for "
                    f"`{module.replace('.', '/')}.py` under `{project_dir}`)"
                ) from e
            raise ImportProblem(f"importing `{module}` failed: ModuleNotFoundError: {e}") from e
        except Exception as e:  # user code: any error is reported, never swallowed
            raise ImportProblem(f"importing `{module}` failed: {type(e).__name__}: {e}") from e


def import_reference(project_dir: Path, reference: str) -> Callable[..., Any]:
    """`package.module:function` → the callable, imported from the project folder."""
    module_name, _, attr = reference.partition(":")
    module = import_module(project_dir, module_name)
    target = getattr(module, attr, None)
    if target is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ImportProblem(
            f"module `{module_name}` has no `{attr}` (callables there: "
            f"{', '.join(f'`{n}`' for n in public) or 'none'})"
        )
    if not callable(target):
        raise ImportProblem(f"`{reference}` is a {type(target).__name__}, not a function")
    return target
