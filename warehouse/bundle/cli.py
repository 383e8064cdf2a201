"""`warehouse bundle`: arguments and the command (wired in by `warehouse.cli.main`)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "-o", default="env.tar.gz", metavar="FILE",
                        help="archive to write (.tar.gz, .tgz, .zip, ...; default env.tar.gz)")
    parser.add_argument("--venv", default=None, metavar="DIR",
                        help="virtual environment to pack (default: the one running warehouse)")
    parser.add_argument("--with-pyspark", action="store_true",
                        help="keep pyspark in the archive (executors normally use the cluster's own)")
    parser.add_argument("--wheel", action="append", default=[], metavar="WHL",
                        help="also install this wheel into the archive (no dependencies); repeatable")
    parser.add_argument("--python-prefix", default=None, metavar="DIR",
                        help="where the base Python lives on the executors, if not where it is here")
    parser.add_argument("--force", action="store_true", help="overwrite FILE")


def run(args: argparse.Namespace) -> int:
    from warehouse.bundle.build import build_bundle

    result = build_bundle(
        args.output,
        venv=args.venv,
        include_pyspark=args.with_pyspark,
        wheels=args.wheel,
        python_prefix=args.python_prefix,
        force=args.force,
    )
    mib = result.size_bytes / 2**20
    rebuilt = ", ".join(result.editable) or "none"
    print(f"wrote {result.path} ({mib:.0f} MiB); editable installs packed as wheels: {rebuilt}")
    print(f"bin/python links to {result.base_python}: the executors need that interpreter there")
    print("ship it with: spark-submit " + " ".join(result.spark_submit_args()) + " ...")
    sys.stdout.flush()
    return 0
