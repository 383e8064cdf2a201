"""`warehouse ui`: the project's pipeline as a live local page (docs/ui.md).

`PipelineView` gathers what the page shows (no web framework); `serve` builds the page
(`warehouse.ui.app`, Dash with dash-cytoscape, the `ui` extra) and serves it. Importing
this package does not import Dash.
"""

from __future__ import annotations

from warehouse.ui.serve import DEFAULT_HOST, serve
from warehouse.ui.view import PipelineView

__all__ = ["DEFAULT_HOST", "PipelineView", "serve"]
