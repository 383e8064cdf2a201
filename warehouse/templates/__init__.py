"""`warehouse init DIR`: copy the starter project in `templates/project/` into DIR.

The starter passes `warehouse plan` as it is: one Kafka topic landed in ODS, a
deduplicated DWD table over it and an ADS view published to Kafka, on the embedded
broker, with a sample of events (`samples/events.jsonl`) its README's first run feeds in.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from warehouse.errors import WarehouseError

logger = logging.getLogger(__name__)

TEMPLATE_DIR = Path(__file__).resolve().parent / "project"


class ScaffoldError(WarehouseError):
    """The target folder cannot take a new project."""

    exit_code = 2


def template_files() -> list[Path]:
    """The starter's files, relative to the template folder."""
    return sorted(
        p.relative_to(TEMPLATE_DIR)
        for p in TEMPLATE_DIR.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def scaffold(target: Path) -> list[Path]:
    """Copy the starter project into `target` (new or empty); returns the files created."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise ScaffoldError(f"`{target}` exists and is not a folder; choose another DIR.")
    if target.is_dir() and any(target.iterdir()):
        raise ScaffoldError(
            f"`{target}` is not empty; `warehouse init` only writes into a new or empty folder."
        )
    created = []
    for rel in template_files():
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TEMPLATE_DIR / rel, dest)
        created.append(dest)
    logger.info("scaffolded %d files into %s", len(created), target)
    return created
