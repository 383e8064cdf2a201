"""Crash points for the kill tests (tests/integration/crash/).

`WAREHOUSE_CRASH_POINT` names one or more points (comma separated, e.g.
`before_commit,after_commit`) and `WAREHOUSE_CRASH_PROBABILITY` (default 1.0) how
often the process SIGKILLs itself when it reaches one. Unset in production: the
check is one dictionary lookup. The environment is read here, at the only place
that needs it, because the point of the hook is to reach into a running query.
"""

from __future__ import annotations

import logging
import os
import random
import signal

logger = logging.getLogger(__name__)

CRASH_POINT_ENV = "WAREHOUSE_CRASH_POINT"
CRASH_PROBABILITY_ENV = "WAREHOUSE_CRASH_PROBABILITY"


def crash_point(name: str) -> None:
    """SIGKILL this process if `name` is an armed crash point (and the dice say so)."""
    armed = os.environ.get(CRASH_POINT_ENV)
    if not armed or name not in armed.split(","):
        return
    probability = float(os.environ.get(CRASH_PROBABILITY_ENV, "1.0"))
    if random.random() < probability:
        logger.warning("crash point `%s` reached: killing pid %d", name, os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)
