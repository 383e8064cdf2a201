"""`spark-submit warehouse/submit.py --layer L [--project DIR] [--env E] [--once]
[--full-refresh T[,U] | --full-refresh-all] [--allow-data-loss]`.

The same as `warehouse run`, on the session `spark-submit` configured (master,
jars, conf from the cluster). Works as a plain script file: when the
`warehouse` package is not importable (not installed on the cluster's Python),
the folder above this file is put on `sys.path`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _ensure_importable() -> None:
    try:
        import warehouse  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="spark-submit warehouse/submit.py")
    p.add_argument("--layer", choices=("ods", "dwd", "dws", "ads", "all"), default="all")
    p.add_argument("--table", action="append", metavar="T")
    p.add_argument("--project", default=".", metavar="DIR")
    p.add_argument("--env", default="local", metavar="NAME")
    p.add_argument("--once", action="store_true")
    p.add_argument(
        "--full-refresh",
        type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
        default=[],
        metavar="T[,U]",
        help="reset these tables and those reading them as a stream, then rebuild them",
    )
    p.add_argument("--full-refresh-all", action="store_true")
    p.add_argument("--allow-data-loss", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    _ensure_importable()
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from pyspark.sql import SparkSession

    from warehouse.errors import WarehouseError
    from warehouse.project import Project

    try:
        project = Project.load(args.project, env=args.env)
        # spark-submit has set master, jars and conf; take its session as it is.
        spark = (
            SparkSession.getActiveSession()
            or SparkSession.builder.appName(f"warehouse {args.layer}").getOrCreate()
        )
        results = project.pipeline(
            spark,
            args.layer,
            args.table,
            progress=lambda s: print(s, flush=True),
            full_refresh=args.full_refresh,
            full_refresh_all=args.full_refresh_all,
            allow_data_loss=args.allow_data_loss,
        ).run(once=args.once)
    except WarehouseError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"done: {len(results)} table(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
