"""Keeping the garbage collection a reused Python worker runs after each task small.

Spark's Python daemon runs a full `gc.collect()` in a reused worker after every task
(pyspark's `daemon.py`). A full collection walks every object the process tracks, and a
worker that has imported pyarrow, delta-rs's bindings and this package tracks 56,000-85,000
of them: one collection took 15-120 ms of CPU on a 2-core machine, and the Python
workers of the example's continuous order path spent about three quarters of their CPU
in it (docs/decisions/0074-python-workers-freeze-what-they-imported.md). Nearly all of
those objects live as long as the worker: modules, classes, functions, constants.

So each task of this package, first thing, moves what the worker tracks out of the
collector's reach (`gc.freeze`, which Python has for long-lived objects) when the worker
has imported modules since it last did: in its first task, and in the first task of a
new kind. The collection after a task then walks only what was allocated since.
Frozen objects are still freed by reference counting; a reference cycle among them is
kept until the worker exits, which is why a freeze follows a collection and happens only
when modules were added (a few times in a worker's life).

Workers run one task at a time; the driver may call this too (tests run tasks in it), where
it is as harmless.
"""

from __future__ import annotations

import gc
import sys

_modules_at_freeze = 0
"""How many modules this process had imported when it last froze its objects."""


def freeze_imports() -> None:
    """Collect, then freeze every object the process tracks, when it has imported modules
    since the last time; else nothing (a length's comparison)."""
    global _modules_at_freeze
    modules = len(sys.modules)
    if modules == _modules_at_freeze:
        return
    gc.collect()
    gc.freeze()
    _modules_at_freeze = modules
