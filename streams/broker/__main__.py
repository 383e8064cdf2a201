"""`python -m streams.broker --host H --port P --data-dir D [--port-file F] [--pid-file P]
[--config k=v ...] [--config-stdin]`.

`--config-stdin` reads configs as one JSON object (`{"sasl.users": "alice:pw"}`) from
stdin before starting, over the `--config` pairs: how the launcher passes them, so that
no password is on the process's command line, which every user of the machine can read.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import json
import logging
import sys
from pathlib import Path

if __name__ == "__main__":
    # kio registers test strategies with hypothesis when it finds hypothesis installed
    # (as in a development environment), and that import pulls in pytest and trio's
    # testing modules: 0.38 of the 0.54 CPU-s `import streams.broker.__main__` took on
    # this machine. A broker process never generates test data; with hypothesis
    # marked absent, kio skips the registration.
    sys.modules.setdefault("hypothesis", None)

from streams.broker.app import BrokerLockedError, run
from streams.broker.config import BrokerConfig, ConfigError
from streams.broker.errors import BrokerError
from streams.broker.launcher import EXIT_ADDRESS_IN_USE


def _stdin_configs() -> dict[str, str]:
    """The JSON object of configs on stdin; `ValueError` naming what is wrong."""
    text = sys.stdin.read()
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise ValueError(f"configs on stdin are not a JSON object: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"configs on stdin are a JSON `{type(data).__name__}`, not an object")
    return {str(k): str(v).strip() for k, v in data.items()}


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"`{text}` is not key=value (e.g. num.partitions=3)")
    return key.strip(), value.strip()


_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _tune_allocator() -> None:
    """Keep freed request buffers in the heap (glibc only; a no-op elsewhere).

    Every produce request allocates its frame (~1 MB) and kio's copy of the
    record batches (~1 MB). With glibc's defaults those come from fresh mmap or
    trimmed heap pages, so each one is page-faulted in again: ~470 minor faults
    per MB produced, about 40% of the broker's CPU per MB on this VM. With
    allocations up to 32 MB served from the heap and up to 128 MB of free heap
    kept, the pages are reused (measured: 0 faults/MB, 2.6-3.9 -> 1.5-2.3 ms/MB).
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    try:
        mallopt = ctypes.CDLL(libc_name).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)
    mallopt(_M_TRIM_THRESHOLD, 128 * 1024 * 1024)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streams.broker", description="Single-node Kafka-protocol broker."
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9092, help="port; 0 picks a free one")
    parser.add_argument("--data-dir", type=Path, required=True, help="where the logs live")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    parser.add_argument("--pid-file", type=Path, help="write the process id here")
    parser.add_argument(
        "--config",
        type=_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker or default topic config, repeatable",
    )
    parser.add_argument(
        "--config-stdin",
        action="store_true",
        help="also read configs from stdin, one JSON object (keeps passwords off the command line)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    pairs = dict(args.config)
    try:
        if args.config_stdin:
            pairs.update(_stdin_configs())
        config = BrokerConfig.from_pairs(
            args.data_dir.resolve(), pairs, host=args.host, port=args.port
        )
    except ValueError as e:  # a ConfigError, or configs on stdin that do not parse
        print(f"error: {e}", file=sys.stderr)
        return 2
    _tune_allocator()
    try:
        run(config, port_file=args.port_file, pid_file=args.pid_file)
    except (BrokerLockedError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokerError as e:  # storage refused to load the data dir
        print(f"error: {e.detail or e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot start the broker on {args.host}:{args.port}: {e}", file=sys.stderr)
        return EXIT_ADDRESS_IN_USE if e.errno == errno.EADDRINUSE else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
