"""`warehouse broker start` as a user runs it: a folder with only `conf/local.yml` gets
its `kafka.embedded.config`, `--config KEY=VALUE` goes over it, a broken conf or a
malformed pair exits 2. A real broker process; stopped by its pid in a `finally`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support.ports import free_port

pytestmark = [pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[3]


def warehouse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip


def conf_only(folder: Path, conf: str) -> Path:
    """A folder with nothing but `conf/local.yml`: not a loadable project (no `layers/`)."""
    (folder / "conf").mkdir(parents=True)
    (folder / "conf" / "local.yml").write_text(conf)
    return folder


def stop_by_pid(data_dir: Path) -> None:
    """Stop the broker of `data_dir` by the pid it wrote, whatever the test got to."""
    pid_file = data_dir / "broker.pid"
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)  # ProcessLookupError once it is gone
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def partitions_of(bootstrap: str, topic: str) -> int:
    """Auto-create `topic` by producing one record to it, then count its partitions."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"v", key=b"k")
    assert producer.flush(30) == 0
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return len(meta.topics[topic].partitions)


def start(project: Path, data_dir: Path, *extra: str) -> str:
    port = free_port()
    done = warehouse(
        "--project", str(project), "broker", "start",
        "--data-dir", str(data_dir), "--port", str(port), *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = warehouse("broker", "status", "--data-dir", str(data_dir))
    assert status.returncode == 0, status.stderr
    bootstrap = json.loads(status.stdout)["bootstrap"]
    assert bootstrap == f"127.0.0.1:{port}"
    return str(bootstrap)


def test_a_conf_only_folder_gives_the_broker_its_embedded_config(tmp_path: Path) -> None:
    project = conf_only(  # a number, as a Kafka user writes it
        tmp_path / "p", "kafka:\n  embedded:\n    config: {num.partitions: 3}\n"
    )
    data_dir = tmp_path / "d"
    try:
        bootstrap = start(project, data_dir)
        assert partitions_of(bootstrap, "auto-created") == 3
        stop = warehouse("broker", "stop", "--data-dir", str(data_dir))
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stderr
    finally:
        stop_by_pid(data_dir)


def test_config_pairs_go_over_the_projects_embedded_config(tmp_path: Path) -> None:
    project = conf_only(tmp_path / "p", 'kafka:\n  embedded:\n    config: {num.partitions: "3"}\n')
    data_dir = tmp_path / "d"
    try:
        bootstrap = start(project, data_dir, "--config", "num.partitions=2")
        assert partitions_of(bootstrap, "auto-created") == 2
    finally:
        stop_by_pid(data_dir)


def test_a_broken_conf_or_a_malformed_pair_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    broken = conf_only(
        tmp_path / "broken", "kafka:\n  embedded:\n    config: {num.partitions: [3]}\n"
    )
    data_dir = tmp_path / "d"
    try:
        done = warehouse(
            "--project", str(broken), "broker", "start", "--data-dir", str(data_dir), "--port", "0"
        )
        assert done.returncode == 2, done.stderr
        # The file and the field: what the user fixes.
        assert "conf/local.yml: kafka.embedded.config.num.partitions" in done.stderr
        assert "Traceback" not in done.stderr

        fine = conf_only(tmp_path / "fine", "kafka: {embedded: {port: 0}}\n")
        done = warehouse(
            "--project", str(fine), "broker", "start", "--data-dir", str(data_dir),
            "--config", "num.partitions=3", "--config", "num.partitions",
        )  # fmt: skip
        assert done.returncode == 2
        assert "`num.partitions` is not KEY=VALUE" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (data_dir / "broker.pid").exists()
    finally:
        stop_by_pid(data_dir)


def test_a_port_another_projects_broker_holds_is_named_with_the_way_out(tmp_path: Path) -> None:
    """Two projects whose embedded brokers are given the same port: the second cannot
    listen, and says so (not the broker's log), with the setting that gives it its own."""
    port = free_port()
    projects = []
    for name in ("a", "b"):
        assert warehouse("init", str(tmp_path / name)).returncode == 0
        conf = tmp_path / name / "conf" / "local.yml"
        conf.write_text(
            conf.read_text().replace(
                "kafka:\n", f"kafka:\n  embedded: {{host: 127.0.0.1, port: {port}}}\n", 1
            )
        )
        projects.append(tmp_path / name)
    a, b = projects
    try:
        started = warehouse("--project", str(a), "broker", "start")
        assert started.returncode == 0, started.stderr
        produced = warehouse(
            "--project", str(b), "produce", "--topic", "events", str(b / "samples/events.jsonl")
        )
        assert produced.returncode == 2, produced.stderr
        [line] = [ln for ln in produced.stderr.splitlines() if ln.startswith("error: ")]
        assert line == (
            f"error: The project's embedded broker (data {b / '.warehouse' / 'broker'}) cannot "
            f"listen on 127.0.0.1:{port}: another process listens there, such as another "
            "project's embedded broker (`warehouse broker stop` in that project's folder stops "
            "it). Stop it, or give this project its own port: `kafka.embedded.port` in "
            "conf/<env>.yml (0: any free port)."
        )
        again = warehouse("--project", str(b), "broker", "start")
        assert again.returncode == 1
        assert f"on 127.0.0.1:{port}: another process listens there" in again.stderr
    finally:
        for p in projects:
            stop_by_pid(p / ".warehouse" / "broker")


def test_start_prints_no_password_and_puts_none_on_a_command_line(tmp_path: Path) -> None:
    """`sasl.users` from the conf and a password given with `--config`: `broker start`
    says which configs it started with, each password as Kafka logs one (`[hidden]`), and
    the detached broker process does not carry them in its command line."""
    project = conf_only(
        tmp_path / "p", "kafka:\n  embedded:\n    config: {sasl.users: 'alice:conf-pw-93b1'}\n"
    )
    data_dir = tmp_path / "d"
    try:
        done = warehouse(
            "--project", str(project), "broker", "start", "--data-dir", str(data_dir),
            "--port", str(free_port()), "--config", "ssl.key.password=cli-pw-4d2a",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "conf-pw-93b1" not in done.stdout + done.stderr
        assert "cli-pw-4d2a" not in done.stdout + done.stderr
        assert "sasl.users=[hidden]" in done.stdout
        assert "ssl.key.password=[hidden]" in done.stdout
        pid = int((data_dir / "broker.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert "conf-pw-93b1" not in cmdline and "cli-pw-4d2a" not in cmdline

        again = warehouse(
            "--project", str(project), "broker", "start", "--data-dir", str(data_dir),
            "--config", "ssl.key.password=cli-pw-4d2a",
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stdout
        assert "conf-pw-93b1" not in again.stdout and "cli-pw-4d2a" not in again.stdout
    finally:
        stop_by_pid(data_dir)
