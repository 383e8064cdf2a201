"""`python -m warehouse ...` is the `warehouse` command."""

from __future__ import annotations

from warehouse.cli.main import entry

if __name__ == "__main__":
    entry()
