"""The core API handlers and the registry the server dispatches on.

Each module lists its APIs in `APIS`: `(api_key, (min_version, max_version),
handler)`. The registry below is built from those modules; the coordinator's
handlers are merged by the server at start (see `streams.broker.extension`), so
adding an API never needs an edit here unless it is a core one.
"""

from __future__ import annotations

from streams.broker.context import Handler
from streams.broker.handlers import (
    acls,
    api_versions,
    catalog,
    configs,
    fetch,
    list_offsets,
    metadata,
    produce,
    quotas,
    records,
    topics,
)

__all__ = ["API_VERSIONS", "HANDLERS", "api_versions", "catalog"]

_MODULES = (
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    topics,
    configs,
    records,
    acls,
    quotas,
)

HANDLERS: dict[int, Handler] = {}
API_VERSIONS: dict[int, tuple[int, int]] = {}
for _module in _MODULES:
    for _key, _versions, _handler in _module.APIS:
        HANDLERS[_key] = _handler
        API_VERSIONS[_key] = _versions
