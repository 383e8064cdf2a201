"""A bounded soak: the example warehouse running continuously (`warehouse run --layer
all`, a subprocess as a user runs it) on the bundled broker while, for a couple of
minutes, the run is SIGKILLed, the broker is SIGKILLed and started again on its data,
and the broker's disk (a small tmpfs) fills up while the ADS tables publish. A run that
dies is started again, as an operator would; then a last `--once` run drains what is
left. Every table must equal the independent computation of
tests/integration/demo/expected.py, every source record must be in its ODS table or its
quarantine exactly once, and the published views must hold each change once.

The example's events are produced before the chaos: every table then takes its whole
input in its first batch, replayed whole after a kill, so its result does not depend on
where the kills cut the run (with records arriving during the run, the watermarks would
drop late rows depending on batch boundaries, and no result would be *the* exact one).
The disk fills while the publisher writes its transactions; the broker takes the data
dir offline on the failed write (KAFKA_STORAGE_ERROR) until it is started again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streams.broker.launcher import BrokerProcess
from streams.kafka.admin import end_offsets
from tests.integration.demo.expected import compute
from tests.integration.demo.tables import assert_published, assert_tables, ods_coordinates
from tests.support.disks import SmallTmpfs, require_root
from tests.support.ports import free_port
from warehouse.generate import TOPICS, generate

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[3]
EVENTS, SEED = 300, 23
CHAOS_SECONDS = 150
"""How long the run, the broker and the disk are disturbed (the test's bound)."""
DISK_BYTES = 256 << 20
FULL_SECONDS = 15
MAX_DRAINS = 4


class Run:
    """One `warehouse run` subprocess in its own process group (the CLI, its Spark JVM and
    Python workers), its output kept by a thread."""

    def __init__(self, env: dict[str, str], log: Path, *, once: bool) -> None:
        command = [sys.executable, "-m", "warehouse", "--project", str(REPO)]
        command += ["run", "--layer", "all"] + (["--once"] if once else [])
        self.once = once
        self.lines: list[str] = []
        self.log = log
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=log.parent,
            start_new_session=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("w") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                self.lines.append(line.rstrip("\n"))

    def seen(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def kill(self) -> None:
        """SIGKILL the whole process group: no batch boundary, no cleanup."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self._thread.join(30)

    def finish(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(60)
            self._thread.join(30)


class Chaos:
    """The run, the broker and the disk, disturbed at random for `CHAOS_SECONDS`."""

    def __init__(self, tmp: Path, disk: SmallTmpfs, env: dict[str, str], port: int) -> None:
        self.tmp, self.disk, self.env, self.port = tmp, disk, env, port
        # Shown with a failure's output: the same seed replays the same choices (their
        # timing is the machine's).
        seed = os.environ.get("CRASH_SEED") or str(time.time_ns())
        print(f"CRASH_SEED={seed}")
        self.rng = random.Random(seed)
        self.broker = self._broker()
        self.runs: list[Run] = []
        self.events: list[str] = []

    def _broker(self) -> BrokerProcess:
        # `sync`: what the broker acknowledged with acks=all survives its SIGKILL.
        config = {"log.durability": "sync"}
        return BrokerProcess(self.disk.mountpoint / "data", port=self.port, config=config).start(60)

    def start_run(self) -> None:
        self.runs.append(Run(self.env, self.tmp / f"run-{len(self.runs) + 1}.log", once=False))

    def restart_broker(self) -> None:
        self.broker.kill()
        self.broker = self._broker()

    def fill_disk(self) -> None:
        """Fill the broker's disk while the ADS tables publish, then free it and start the
        broker again (the failed write took its data dir offline)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not self.runs[-1].seen("ads_"):
            time.sleep(0.5)
        self.disk.fill()
        time.sleep(FULL_SECONDS)
        self.disk.free()
        self.restart_broker()

    def step(self) -> None:
        """One disturbance: a run killed (and started again), or the broker killed and
        started again on its data; a run that died by itself is started again."""
        if self.runs[-1].proc.poll() is not None:
            self.events.append(f"run {len(self.runs)} exited {self.runs[-1].proc.returncode}")
            self.start_run()
        elif self.rng.random() < 0.5:
            self.events.append(f"run {len(self.runs)} SIGKILLed")
            self.runs[-1].kill()
            self.start_run()
        else:
            self.events.append("broker SIGKILLed and started again")
            self.restart_broker()

    def play(self) -> None:
        self.start_run()
        filled = False
        deadline = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < deadline:
            time.sleep(self.rng.uniform(10, 25))
            if not filled and self.rng.random() < 0.4:
                self.events.append("broker disk full for the ADS layer's publish")
                self.fill_disk()
                filled = True
            self.step()
        if not filled:
            self.events.append("broker disk full for the ADS layer's publish")
            self.fill_disk()
        self.runs[-1].kill()


def test_the_continuous_example_survives_kills_and_a_full_disk(tmp_path: Path, engine: str) -> None:
    require_root()
    port = free_port()
    root = tmp_path / "wh"
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "WAREHOUSE__KAFKA__BOOTSTRAP": f"127.0.0.1:{port}",
        "WAREHOUSE__WAREHOUSE_ROOT": str(root),
        "WAREHOUSE__SPARK__MASTER": "local[2]",
        "WAREHOUSE__ENGINES__KAFKA": engine,
        "WAREHOUSE__ENGINES__DELTA": engine,
    }
    with SmallTmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        chaos = Chaos(tmp_path, disk, env, port)
        try:
            generated = subprocess.run(
                [sys.executable, "-m", "warehouse", "--project", str(REPO), "generate"]
                + ["--events", str(EVENTS), "--seed", str(SEED)],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert generated.returncode == 0, generated.stdout + generated.stderr
            ends = {t: end_offsets(chaos.broker.bootstrap, t)[t] for t in TOPICS}
            chaos.play()
            drains = chaos.runs  # a drain is one more run, stopped with the others
            drains.append(Run(env, tmp_path / "drain-1.log", once=True))
            while drains[-1].finish(900) != 0 and sum(r.once for r in drains) < MAX_DRAINS:
                drains.append(
                    Run(env, tmp_path / f"drain-{sum(r.once for r in drains) + 1}.log", once=True)
                )
            print("chaos:", "; ".join(chaos.events))
            assert drains[-1].proc.returncode == 0, "\n\n".join(
                "\n".join(r.lines[-60:]) for r in drains[-3:]
            )
            for topic in ("orders", "payments", "page_views"):
                assert ods_coordinates(root, topic) == {
                    (p, o): 1 for p, end in ends[topic].items() for o in range(end)
                }, topic
            exp = compute(generate(EVENTS, seed=SEED))
            assert_tables(root, exp)
            assert_published(chaos.broker.bootstrap, exp)
        finally:
            for run in chaos.runs:
                run.kill()
            chaos.broker.stop()
