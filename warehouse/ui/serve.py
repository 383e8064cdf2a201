"""Serving the pipeline page on a local port."""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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
    view = PipelineView(project)
    app = build_app(view)
    logger.info("pipeline page of %s at http://%s:%d/", project.path, host, port)
    with _sigterm_interrupts():
        try:
            # Returns on KeyboardInterrupt once werkzeug's loop serves; one that comes
            # between the port's bind and that loop (a SIGTERM as soon as the port
            # answers) is the same stop.
            app.run(host=host, port=port, debug=False)
        except KeyboardInterrupt:
            pass
        finally:
            view.close()  # the Kafka consumers it kept


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the server as Ctrl-C does, so the view closes what it keeps (the
    default SIGTERM ends the process at once). Main thread only, as Python wants."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
