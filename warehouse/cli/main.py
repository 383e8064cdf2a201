"""`warehouse` command line: argparse front end, exit codes, error printing.

Exit codes: 0 success; 1 a run/check failed; 2 the project, its environment or the
command line is wrong (`ProjectError`, unknown table/layer, Spark cannot start).
Known errors (`warehouse.errors.known_errors`: `WarehouseError` and the `streams` roots) print
their message to stderr without a traceback; `-v` adds the traceback and INFO logging.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from warehouse.cli.broker import config_pair
from warehouse.errors import known_errors
from warehouse.generate import DEFAULT_START, iso

logger = logging.getLogger(__name__)

LAYER_CHOICES = ("ods", "dwd", "dws", "ads", "all")
GENERATOR_START = iso(DEFAULT_START)


def _add_common(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """`--project`, `--env` and `-v`, taken before and after a command's name.

    Only the top-level parser holds the defaults; a command's own copies default to
    SUPPRESS, so they set a value only when given, and argparse copies what a
    subparser parsed over the top level's: a value after the command wins.
    """

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--project", default=default("."), metavar="DIR", help="project folder (default: .)"
    )
    parser.add_argument(
        "--env", default=default("local"), metavar="NAME", help="conf/<NAME>.yml (default: local)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default(False),
        help="log progress and show tracebacks",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warehouse",
        description="A layered real-time data warehouse on Spark, Kafka and Delta.",
    )
    _add_common(parser, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, defaults=False)
    sub = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True), common)

    _table_commands(sub)
    _broker_commands(sub, common)
    _topic_commands(sub)
    _channel_commands(sub)
    _example_commands(sub)
    _setup_commands(sub)
    return parser


def _table_commands(sub: _Commands) -> None:
    """The commands over a project's tables: plan, run, status, ui, recover, reset, init,
    check, test, optimize, vacuum."""
    p = sub.add_parser(
        "plan",
        help="show the compiled graph and what changed since each table last ran",
    )
    p.add_argument("--layer", choices=LAYER_CHOICES)
    p.add_argument("--table", action="append", metavar="T")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--format", choices=("text", "json", "mermaid", "dot"), default="text")

    p = sub.add_parser("run", help="run the queries of a layer (or of tables)")
    p.add_argument("--layer", choices=LAYER_CHOICES)
    p.add_argument("--table", action="append", metavar="T")
    p.add_argument("--once", action="store_true", help="process what is available, then exit")
    p.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run on this Spark Connect server (overrides `spark.remote` of conf/<env>.yml)",
    )
    p.add_argument(
        "--refresh",
        type=_table_list,
        metavar="T[,U]",
        help="run only these tables, incrementally (as --table)",
    )
    p.add_argument(
        "--full-refresh",
        type=_table_list,
        metavar="T[,U]",
        help="reset these tables and those reading them as a stream, then rebuild them",
    )
    p.add_argument(
        "--full-refresh-all",
        action="store_true",
        help="reset and rebuild every selected table (and those reading them)",
    )
    p.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="full refresh even where the topic no longer holds what the table was read from",
    )

    p = sub.add_parser("status", help="per table: path, version, rows, last batch, offsets, lag")
    p.add_argument("--layer", choices=LAYER_CHOICES)
    p.add_argument("--table", action="append", metavar="T")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("ui", help="the pipeline as a live local page: graph, state, rows, quality")
    p.add_argument("--port", type=int, default=8050, metavar="P")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to serve on (default: this machine only)"
    )

    p = sub.add_parser("recover", help="rebuild a table's checkpoint from its own Delta log")
    p.add_argument("--table", required=True, metavar="T")

    p = sub.add_parser("reset", help="drop a table, its quarantine and its checkpoint")
    p.add_argument("--table", required=True, metavar="T")
    p.add_argument("--yes", action="store_true", help="confirm: the data is deleted")

    p = sub.add_parser("init", help="scaffold a new project in DIR")
    p.add_argument("dir", metavar="DIR")

    p = sub.add_parser("check", help="validate tables with their expectations (great-expectations)")
    p.add_argument("--layer", choices=LAYER_CHOICES)
    p.add_argument("--table", metavar="T")
    p.add_argument("--report", metavar="DIR", help="write results.json and data docs here")
    p.add_argument(
        "--incremental", action="store_true", help="only data added since the last check"
    )

    p = sub.add_parser("test", help="run the table tests of tests/*.yml (no broker needed)")
    p.add_argument("--table", action="append", metavar="T", help="only the tests of T")
    p.add_argument(
        "--select", action="append", metavar="NAME", help="only tests named NAME (* and ? match)"
    )
    p.add_argument(
        "--engine", choices=("native", "python"), help="the Kafka and Delta engines to run on"
    )

    for name, text in (
        ("optimize", "compact small files"),
        ("vacuum", "delete unreferenced files"),
    ):
        p = sub.add_parser(name, help=f"{text} of a table")
        p.add_argument("--table", required=True, metavar="T")
        if name == "vacuum":
            p.add_argument("--retention-hours", type=int, default=168)
            p.add_argument(
                "--force",
                action="store_true",
                help="vacuum below Delta's minimum retention or what a stream reader needs",
            )


def _broker_commands(sub: _Commands, common: argparse.ArgumentParser) -> None:
    """`warehouse broker start|stop|status`."""
    p = sub.add_parser("broker", help="the bundled Kafka-protocol broker")
    bsub = _Commands(
        p.add_subparsers(dest="broker_command", metavar="ACTION", required=True), common
    )
    b = bsub.add_parser("start", help="start it (detached unless --foreground)")
    b.add_argument("--port", type=int, default=None, help="port (default 9092, 0 = any free)")
    b.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    b.add_argument("--data-dir", default=None, metavar="D", help="default <warehouse_root>/broker")
    b.add_argument("--foreground", action="store_true")
    b.add_argument(
        "--config",
        type=config_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker or default topic setting (e.g. num.partitions=3), over the project's "
        "kafka.embedded.config; repeatable",
    )
    for action in ("stop", "status"):
        b = bsub.add_parser(action, help=f"{action} the broker")
        b.add_argument("--data-dir", default=None, metavar="D")


def _topic_commands(sub: _Commands) -> None:
    """`produce` and `consume`: JSON lines into a topic, a topic's records out."""
    p = sub.add_parser("produce", help="send JSON lines to a topic (all lines checked first)")
    p.add_argument("--topic", required=True, metavar="T")
    p.add_argument(
        "--cluster",
        default="default",
        metavar="NAME",
        help="the Kafka cluster of the topic: a name of `kafka.clusters` (default: `default`)",
    )
    p.add_argument("--key", metavar="FIELD", help="key each record by this top-level field")
    p.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="FILE",
        help="JSON lines, one record each (default -: standard input)",
    )

    p = sub.add_parser("consume", help="print a topic's records as key<TAB>value (read_committed)")
    p.add_argument("--topic", required=True, metavar="T")
    p.add_argument(
        "--cluster",
        default="default",
        metavar="NAME",
        help="the Kafka cluster of the topic: a name of `kafka.clusters` (default: `default`)",
    )
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the beginning (default: only records produced from now on)",
    )
    p.add_argument("--max", type=int, default=None, metavar="N", help="exit after N records")
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="exit when nothing new came for S seconds (default 5; 0: never)",
    )


def _channel_commands(sub: _Commands) -> None:
    """`mirror`: MirrorMaker 2 between clusters (docs/channels.md)."""
    sub.add_parser(
        "mirror",
        help="run MirrorMaker 2 for the `spoke -> hub` flows of `mirror:` (exactly once)",
        description=(
            "Runs Apache Kafka's MirrorMaker 2 (dedicated mode) in the foreground for the "
            "flows of the `mirror:` section of conf/<env>.yml, exactly once into each hub; "
            "topic T of spoke S arrives as `S.T`. Stops on SIGINT/SIGTERM. Needs Java and "
            "the jars `make install` (scripts/kafka-connect.sh) caches."
        ),
    )


def _example_commands(sub: _Commands) -> None:
    """The bundled example: `demo` and `generate`."""
    p = sub.add_parser("demo", help="the example warehouse end to end on the embedded broker")
    p.add_argument(
        "--events", type=int, default=3000, help="business events to generate (default 3000)"
    )
    p.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    p.add_argument(
        "--continuous", action="store_true", help="keep running and producing until Ctrl-C"
    )
    p.add_argument(
        "--rate", type=float, default=20.0, help="events per second with --continuous (default 20)"
    )

    p = sub.add_parser(
        "generate", help="produce the example's events (orders, payments, views, CDC)"
    )
    p.add_argument("--events", type=int, default=3000, help="business events (default 3000)")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="events per second, with event times from now (default: all at once, "
        f"event times from {GENERATOR_START})",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")


def _setup_commands(sub: _Commands) -> None:
    """What a machine or a cluster needs: `jars` and `bundle`."""
    p = sub.add_parser("jars", help="the native engines' jars: resolve them once into a cache")
    p.add_argument(
        "action",
        choices=["fetch", "show"],
        help="fetch: resolve from Maven (once; offline after); show: what is cached",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where the jars are cached (default ~/.cache/spark-warehouse/jars)",
    )
    p.add_argument(
        "--no-class-archive",
        action="store_true",
        help="fetch: do not make the class archive local sessions start faster with",
    )

    p = sub.add_parser("bundle", help="pack the Python environment for executors (--archives)")
    p.add_argument(
        "--output",
        "-o",
        default="env.tar.gz",
        metavar="FILE",
        help="archive to write (.tar.gz, .tgz, .zip, ...; default env.tar.gz)",
    )
    p.add_argument(
        "--venv",
        default=None,
        metavar="DIR",
        help="virtual environment to pack (default: the one running warehouse)",
    )
    p.add_argument(
        "--with-pyspark",
        action="store_true",
        help="keep pyspark in the archive (executors normally use the cluster's own)",
    )
    p.add_argument(
        "--wheel",
        action="append",
        default=[],
        metavar="WHL",
        help="also install this wheel into the archive (no dependencies); repeatable",
    )
    p.add_argument(
        "--python-prefix",
        default=None,
        metavar="DIR",
        help="where the base Python lives on the executors, if not where it is here",
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE")


def _table_list(value: str) -> list[str]:
    """`T[,U]`: table names, comma-separated."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"`{value}` names no table; give `T` or `T,U`")
    return names


class _Commands:
    """A subparsers action whose every parser also takes the common options."""

    def __init__(self, action: Any, common: argparse.ArgumentParser) -> None:
        self._action = action
        self._common = common

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._action.add_parser(
            name, parents=[self._common], **kwargs
        )
        return parser


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # py4j logs every gateway call at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def report(error: BaseException, *, verbose: bool) -> int | None:
    """Print a known error as `error: <message>` (with its traceback when `verbose`) and
    return the exit code: its `exit_code`, else 1 (a failed run). None for any other
    error, which the caller lets through with its traceback: it is a bug to report."""
    if not isinstance(error, known_errors()):
        return None
    if verbose:
        traceback.print_exception(error)
    print(f"error: {error}", file=sys.stderr)
    return int(getattr(error, "exit_code", 1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    from warehouse.cli import commands

    handler = getattr(commands, "cmd_" + args.command)
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        code = report(e, verbose=args.verbose)
        if code is None:
            raise
        return code


def entry() -> None:
    code = main()
    # The interpreter's exit collects its garbage several times over every object the
    # command made (pyspark, py4j, pydantic's and sqlglot's classes): 1.3-1.8 s of a
    # fresh `run --once` at a load of 20, against 0.1-0.3 s with them frozen
    # (docs/decisions/0058). Frozen objects are only left uncollected: the exit still
    # runs the atexit handlers (logging's flush, temporary folders' removal) and
    # flushes the standard streams, and the process's memory goes with it.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
