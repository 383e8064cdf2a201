"""`python -m warehouse ...` is the `warehouse` command."""

from __future__ import annotations

import sys

from warehouse.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
