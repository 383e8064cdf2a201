"""The test cluster's SPARK_HOME: the installed pyspark's own files, whose
`python/lib/pyspark.zip` also carries each module's byte code.

Spark starts every Python process of an application (each executor's daemons and the
workers they fork, the driver's Python data-source daemons and streaming source runner)
with `$SPARK_HOME/python/lib/pyspark.zip` first on its path. The zip pyspark ships holds
sources only, and Python caches no byte code for a zip, so each of those processes
compiled the part of pyspark it imports: 0.7 CPU-s a daemon, 1.05 a source runner,
against 0.25 and 0.52 for the same processes of a local session, which import the
installed, compiled pyspark (docs/decisions/0060, warehouse/runtime/spark_home.py). The
cluster cannot drop the zip as local sessions do: the bundle route's executors run a
Python without pyspark and import it from the zip alone.

So the cluster's home is a folder of symbolic links to the installed pyspark, but for a
zip with the same entries, the same sources and, beside each module, its byte code as
Python's zip importer looks for it (`module.pyc` next to `module.py`), checked against
the source's hash at import (PEP 552). The code Spark's processes run is the zip's own
sources, compiled.
"""

from __future__ import annotations

import importlib.util
import marshal
import zipfile
from pathlib import Path

from warehouse.runtime.spark_home import home_links

_ZIP = "pyspark.zip"
_CHECKED_HASH = (0b11).to_bytes(4, "little")
"""PEP 552's flags of a hash-based .pyc whose source is checked at import."""


def _pyc(source: bytes, filename: str) -> bytes | None:
    """The checked hash-based .pyc of `source`; None when this Python cannot compile it."""
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        return None
    return (
        importlib.util.MAGIC_NUMBER
        + _CHECKED_HASH
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def _compiled_zip(src: Path, dest: Path) -> None:
    """`src`'s entries, each `.py` followed by its `.pyc`, written to `dest`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data)
            pyc = _pyc(data, f"{dest}/{info.filename}") if info.filename.endswith(".py") else None
            if pyc is not None:
                out = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
                out.compress_type = info.compress_type
                zout.writestr(out, pyc)


def compiled_home(home: Path, dest: Path) -> Path:
    """A new SPARK_HOME at `dest` of symbolic links into `home` (an installed pyspark),
    with `python/lib/pyspark.zip` a compiled copy of `home`'s."""
    (dest / "python" / "lib").mkdir(parents=True)
    for rel, target in home_links(home).items():
        (dest / rel).symlink_to(target)
    _compiled_zip(home / "python" / "lib" / _ZIP, dest / "python" / "lib" / _ZIP)
    return dest
