"""The environment archive of `warehouse bundle`, built once for the cluster tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def env_bundle(tmp_path_factory: pytest.TempPathFactory):
    """`build_bundle` of the running venv (pyspark left out, fast compression)."""
    from warehouse.bundle import build_bundle

    return build_bundle(tmp_path_factory.mktemp("bundle") / "env.tar.gz", compress_level=1)
