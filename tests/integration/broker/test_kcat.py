"""kcat (Debian's, linking librdkafka 2.0.2) against the broker: produce, consume, metadata."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.broker_clients import consume_all, create_topic

pytestmark = pytest.mark.kafka


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # A missing kcat fails the test: skipped, it would pass without running anything.
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail(
            "kcat is not on PATH: run scripts/ensure-test-tools.sh (`make test` does), "
            "or install it (Debian: apt-get install kcat)",
            pytrace=False,
        )
    return subprocess.run(
        [kcat, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def test_kcat_produces_consumes_and_lists_metadata(broker, unique) -> None:
    topic = unique("kcat")
    create_topic(broker.bootstrap, topic, partitions=2)
    lines = [f"key{i}:value{i}" for i in range(30)]
    out = _kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K", ":", stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr

    got = consume_all(broker.bootstrap, topic, [0, 1], expected=30)
    assert sorted((k, v) for _, _, k, v in got) == sorted(
        (f"key{i}".encode(), f"value{i}".encode()) for i in range(30)
    )

    out = _kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%k=%s\\n")
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(f"key{i}=value{i}" for i in range(30))
    assert "Read underflow" not in out.stderr

    out = _kcat("-b", broker.bootstrap, "-L", "-t", topic)
    assert out.returncode == 0, out.stderr
    assert f'topic "{topic}" with 2 partitions' in out.stdout
