"""`warehouse broker start|stop|status`: the bundled broker of a project's environment.

A broker needs the environment's settings only (`conf/<env>.yml`: where it keeps its
data, its host and port, `kafka.embedded.config`), never the tables: a folder with just
`conf/` runs the broker its project would. A `conf/<env>.yml` that does not load stops
`start` with the config's errors (exit 2) instead of starting a broker on defaults
nobody wrote, as Kafka's `kafka-server-start.sh` refuses a bad `server.properties`.
`--config KEY=VALUE` (repeatable) goes over `kafka.embedded.config`, as
`python -m streams.broker --config` takes it. What `start` prints shows a password's
value as `[hidden]`, as Kafka logs one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from warehouse.spec.config import WarehouseConfig
from warehouse.spec.errors import Problem, ProjectError
from warehouse.spec.loader import load_config
from warehouse.spec.paths import broker_dir

_ENV_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def config_pair(text: str) -> tuple[str, str]:
    """`KEY=VALUE` of `--config` (argparse `type`): a pair without `=` or key is exit 2."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"`{text}` is not KEY=VALUE; write e.g. `--config num.partitions=3`"
        )
    return key.strip(), value.strip()


def load_settings(project: str, env: str) -> tuple[Path, WarehouseConfig]:
    """The project folder and its environment's settings, read from `conf/<env>.yml` (and
    `WAREHOUSE__...` variables) without the tables; `ProjectError` (exit 2) when they do
    not load."""
    project_dir = Path(project).expanduser().resolve()
    if not project_dir.is_dir():
        raise ProjectError(
            [Problem(project, "", f"no project folder at `{project_dir}`")],
            project=str(project_dir),
        )
    if not _ENV_RE.match(env):
        raise ProjectError(
            [Problem("conf/", "", f"`{env}` is not an env name; use letters, digits, `_`, `-`")],
            project=str(project_dir),
        )
    config, problems = load_config(project_dir, env, environ=os.environ, overrides={})
    if problems or config is None:
        raise ProjectError(problems, project=str(project_dir))
    return project_dir, config


def _data_dir(project_dir: Path, config: WarehouseConfig) -> Path:
    root = config.root_location(project_dir)
    return broker_dir(project_dir, root, config.kafka.embedded.data_dir)


def cmd_broker(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    from streams.broker import launcher, loggable_value

    if args.broker_command in ("stop", "status"):
        # An explicit data dir names the broker: no settings are needed to find it.
        data_dir = (
            Path(args.data_dir)
            if args.data_dir
            else _data_dir(*load_settings(args.project, args.env))
        )
        if args.broker_command == "status":
            st = launcher.broker_status(data_dir)
            if not st:
                out(f"no broker running for {data_dir}")
                return 1
            out(json.dumps(st, indent=2, default=str))
            return 0
        stopped = launcher.stop_broker(data_dir)
        out(f"broker {'stopped' if stopped else 'was not running'} ({data_dir})")
        return 0

    project_dir, settings = load_settings(args.project, args.env)
    data_dir = Path(args.data_dir) if args.data_dir else _data_dir(project_dir, settings)
    emb = settings.kafka.embedded
    host = args.host or emb.host
    port = args.port if args.port is not None else emb.port
    config = {**emb.config, **dict(args.config)}
    shown = ", ".join(f"{k}={loggable_value(k, v)}" for k, v in config.items())
    if args.foreground:
        from streams.broker.__main__ import main as broker_main

        data_dir.mkdir(parents=True, exist_ok=True)
        argv = ["--host", host, "--port", str(port), "--data-dir", str(data_dir)]
        argv += ["--pid-file", str(data_dir / launcher.PID_FILE)]
        for key, value in config.items():
            argv += ["--config", f"{key}={value}"]
        out(f"broker starting on {host}:{port} (data {data_dir}); Ctrl-C stops it")
        return broker_main(argv)
    running = launcher.broker_status(data_dir)
    if running:
        # ensure_broker reuses a live broker as it is: say that the settings did not apply.
        line = f"broker already running at {running['bootstrap']} (data {data_dir})"
        if shown:
            line += (
                f"; it keeps the settings it started with, not necessarily {shown}: "
                "`warehouse broker stop`, then start it again to apply them"
            )
        out(line)
        return 0
    bootstrap = launcher.ensure_broker(data_dir, host=host, port=port, config=config)
    out(f"broker running at {bootstrap} (data {data_dir})" + (f"; config {shown}" if shown else ""))
    return 0
