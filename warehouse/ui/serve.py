"""Serving the pipeline page on a local port."""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from warehouse.ui.errors import UiSetupError
from warehouse.ui.view import PipelineView

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
"""The page shows table definitions and data paths: this machine only, unless asked."""


def serve(project: LoadedProject, *, port: int, host: str = DEFAULT_HOST) -> None:
    """Serve the page of `project` at `http://host:port/` until interrupted."""
    try:
        from warehouse.ui.app import build_app
    except ImportError as e:
        raise UiSetupError(
            f"`warehouse ui` needs the `ui` extra, which is not installed ({e}). Install it "
            "with `pip install 'spark-warehouse[ui]'` (`make install` does)."
        ) from e
    _check_free(host, port)
    app = build_app(PipelineView(project))
    logger.info("pipeline page of %s at http://%s:%d/", project.path, host, port)
    app.run(host=host, port=port, debug=False)


def _check_free(host: str, port: int) -> None:
    """Refuse a port another process serves on, naming it (Flask's server would exit 1)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # As the server binds: connections of an earlier server waiting to close do not count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise UiSetupError(
                f"Cannot serve the page on `{host}:{port}`: {e.strerror}. Pick another port "
                "with `--port P`."
            ) from e
