"""What each table's last run was built from, and what its change since needs.

A run records a table's fingerprint (`warehouse.compile.fingerprint`) in its checkpoint
(`<checkpoint>/warehouse-fingerprint.json`) once its query has run on it; `table_changes`
compares every table's recorded fingerprint with the project as it is now, for
`warehouse plan` and for the run's refusal of a table that needs a full refresh
(`refuse_changed`). Reads and writes go through `streams.storage`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.compile.fingerprint import (
    Classified,
    TableChange,
    classify,
    fingerprint,
    keeps_state,
    propagate,
)
from warehouse.runtime.errors import DefinitionChangedError
from warehouse.spec.paths import (
    checkpoint_holds_state,
    checkpoint_is_new,
    fingerprint_file,
    table_exists,
)

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


def upstream_ids(project: LoadedProject, name: str) -> dict[str, str | None]:
    """The Delta table id of each table `name` reads as a stream; None for one not built."""
    from streams.delta import table_id

    out: dict[str, str | None] = {}
    for up in project.tables[name].spec.source.upstream_tables:
        path = project.table_path(up)
        out[up] = table_id(path) if table_exists(path) else None
    return out


def current_fingerprint(project: LoadedProject, name: str) -> dict[str, Any]:
    """What table `name` is built from now."""
    return fingerprint(project, name, upstream_ids=upstream_ids(project, name))


def record_fingerprint(project: LoadedProject, name: str) -> None:
    """Record in the table's checkpoint what its query now runs on (after it ran)."""
    location = fingerprint_file(project.checkpoint_path(name))
    storage.write_text(location, json.dumps(current_fingerprint(project, name), indent=1))
    logger.info("table %s: fingerprint recorded in %s", name, location)


def recorded_fingerprint(project: LoadedProject, name: str) -> dict[str, Any] | None:
    """The fingerprint the table's last run recorded, or None."""
    text = storage.read_text(fingerprint_file(project.checkpoint_path(name)))
    if text is None:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        logger.warning("table %s: its recorded fingerprint does not parse; ignored", name)
        return None
    return found if isinstance(found, dict) else None


def own_change(project: LoadedProject, name: str) -> Classified:
    """Table `name`'s own change since its last run (its inputs' full refreshes aside)."""
    ckpt = project.checkpoint_path(name)
    if checkpoint_is_new(ckpt):
        return Classified("new")
    stateful = checkpoint_holds_state(ckpt) or keeps_state(project.tables[name])
    return classify(
        recorded_fingerprint(project, name), current_fingerprint(project, name), stateful=stateful
    )


def table_changes(project: LoadedProject) -> dict[str, TableChange]:
    """Every table's change since its last run, full refreshes carried downstream."""
    own = {n: own_change(project, n) for n in project.graph.order if n in project.tables}
    existing = {n for n, c in own.items() if c.status != "new"}
    return propagate(project, own, existing=existing)


def refuse_changed(
    project: LoadedProject, names: Iterable[str], *, refreshed: Iterable[str] = ()
) -> None:
    """Before any query starts: no table of `names` that needs a full refresh and is not
    being given one (`refreshed`). Spark would fail its query on the state it keeps, or
    its reader on a position in a replaced table, or write a table that no longer fits
    what it holds; every such table is named at once, with its reasons and the command."""
    changes = table_changes(project)
    skip = set(refreshed)
    needs = [n for n in names if changes[n].status == "full_refresh" and n not in skip]
    if not needs:
        return
    lines = []
    for n in needs:
        c = changes[n]
        also = (
            "; the tables that read it as a stream follow it: "
            + ", ".join(f"`{f}`" for f in c.followers)
            if c.followers
            else ""
        )
        lines.append(
            f"Table `{n}` ({project.tables[n].path}) changed since its last run so that it "
            f"needs a full refresh: {'; '.join(c.reasons)}{also}."
        )
    roots = _roots(changes, needs)
    lines.append(
        "Nothing was run. Rebuild from the inputs with `warehouse run --full-refresh "
        f"{','.join(roots)}` (it resets those tables and the ones that follow them), or "
        "restore the definition the checkpoint was written with. `warehouse plan` lists "
        "every change."
    )
    raise DefinitionChangedError("\n".join(lines), table=needs[0])


def _roots(changes: dict[str, TableChange], needs: list[str]) -> list[str]:
    """The tables whose own change starts each full refresh `needs` takes part in."""
    roots: list[str] = []
    stack = list(needs)
    while stack:
        name = stack.pop(0)
        follows = changes[name].follows
        if not follows and name not in roots:
            roots.append(name)
        stack += follows
    return roots
