"""The `warehouse` command line (`warehouse.cli.main:main`)."""

from __future__ import annotations

from warehouse.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
