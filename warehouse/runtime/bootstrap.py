"""Where the Kafka of an environment is: a bootstrap string, or the embedded broker."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


def resolve_bootstrap(project: LoadedProject, *, start: bool = True) -> str | None:
    """The bootstrap servers to use.

    `embedded` starts the bundled broker on demand (or reuses the live one found
    through its pid file) when `start`; otherwise returns the running one's
    bootstrap, or None when it is not running.
    """
    kafka = project.config.kafka
    if not kafka.is_embedded:
        return kafka.bootstrap
    from streams.broker.launcher import broker_status, ensure_broker

    data_dir = project.broker_dir()
    emb = kafka.embedded
    if start:
        bootstrap = ensure_broker(data_dir, host=emb.host, port=emb.port, config=dict(emb.config))
        logger.info("embedded broker at %s (data %s)", bootstrap, data_dir)
        return bootstrap
    status = broker_status(data_dir)
    if not status:
        return None
    return status.get("bootstrap") or f"{status.get('host', emb.host)}:{status['port']}"
