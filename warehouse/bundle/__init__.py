"""`warehouse bundle`: a relocatable archive of the project's Python environment for
executors (`spark-submit --archives env.tar.gz#env`); see docs/cluster.md."""

from __future__ import annotations

from warehouse.bundle.build import BundleResult, build_bundle, editable_distributions
from warehouse.bundle.errors import BundleArgumentError, BundleError

__all__ = [
    "BundleArgumentError",
    "BundleError",
    "BundleResult",
    "build_bundle",
    "editable_distributions",
]
