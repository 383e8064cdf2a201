"""A federated table's Kafka positions by cluster (`source.kafka.clusters`).

The query reads each cluster with a source of its own, so Spark's offset log holds one
line per source, in the query's source order (the clusters sorted by name):
`{"sources": [offsets, ...]}` as `streams.delta.batch_end_offsets` reads it. What the
table's commits record names each source by its cluster instead,
`{"clusters": {"eu": {"orders": {"0": 42}}, "us": {...}}}`, so that two clusters'
partition 0 never meet and a reader of the log needs no source order to know which
offsets are whose. No Spark import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CLUSTERS_KEY = "clusters"


def by_cluster(offsets: Mapping[str, Any] | None, clusters: Sequence[str]) -> dict | None:
    """`{"sources": [...]}` of a federated query as `{"clusters": {name: offsets}}`;
    None stays None. The sources are the clusters' in `clusters`' order."""
    if offsets is None:
        return None
    sources = offsets.get("sources")
    if not isinstance(sources, list) or len(sources) != len(clusters):
        raise ValueError(
            f"expected the offsets of {len(clusters)} sources (clusters "
            f"{', '.join(f'`{c}`' for c in clusters)}), got `{offsets}`"
        )
    return {CLUSTERS_KEY: dict(zip(clusters, sources, strict=True))}


def as_sources(recorded: Mapping[str, Any] | None, clusters: Sequence[str]) -> dict | None:
    """The reverse of `by_cluster`: recorded `{"clusters": {...}}` as the offset log's
    `{"sources": [...]}` in `clusters`' order; None when a cluster has no offsets there
    (the table was written with other clusters)."""
    if recorded is None:
        return None
    named = recorded.get(CLUSTERS_KEY)
    if not isinstance(named, Mapping) or any(c not in named for c in clusters):
        return None
    return {"sources": [named[c] for c in clusters]}


def of_cluster(recorded: Mapping[str, Any] | None, cluster: str) -> dict | None:
    """One cluster's offsets (`{"topic": {"0": 42}}`) of recorded `{"clusters": {...}}`."""
    named = (recorded or {}).get(CLUSTERS_KEY)
    return dict(named[cluster]) if isinstance(named, Mapping) and cluster in named else None
