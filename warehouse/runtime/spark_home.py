"""A SPARK_HOME for local sessions whose Python workers import the installed pyspark.

Spark starts each Python worker with `$SPARK_HOME/python/lib/pyspark.zip` first on its
`PYTHONPATH`. A pip-installed pyspark ships that zip with sources only, and Python
cannot cache bytecode inside a zip, so every new worker compiles pyspark from source:
importing the streaming source runner took 1.5 s from the zip against 0.5 s from the
installed, pre-compiled package. Spark starts a new worker for each streaming query's
Python source (`createSimpleWorker`), so every query start paid that second (measured
on a 20k-record ODS run: 3.6-4.3 s before, 2.7 s after).

The fix is local to sessions this framework launches itself: SPARK_HOME points to a
directory of links to the installed pyspark's own files (bin, jars, ...) with everything
but `python/lib/pyspark.zip`, so workers find pyspark on the interpreter's own path,
compiled. It applies only when nothing else decides: no SPARK_HOME set, a local master,
workers on this very interpreter (which has the same pyspark installed), and pyspark
installed as a package that carries the zip. Anything unusual keeps Spark's default.

The links are hard links where the cache and the virtualenv share a file system, and the
directory is named by the files themselves (their inodes), not by where pyspark is
installed: uv links the files of one pyspark wheel into every virtualenv it installs it
in, so those virtualenvs launch Spark from one directory, whose jars have one path, and
the class archive made for that class path (`class_archive`) serves all of them, a new
clone's included (docs/decisions/0077). Where hard links cannot be made (another file
system), the directory holds symbolic links and is named by the installation's path.

`launch_java` names the `java` Spark's launcher runs, for the class archive and the
local file system's build, which depend on it.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

_ZIP = "pyspark.zip"


def installed_home() -> Path | None:
    """The pip-installed pyspark package when it is a complete SPARK_HOME carrying
    `python/lib/pyspark.zip`; else None."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    ok = (
        (home / "bin" / "spark-submit").is_file()
        and (home / "jars").is_dir()
        and (home / "python" / "lib" / _ZIP).is_file()
    )
    return home if ok else None


def home_links(home: Path) -> dict[str, Path]:
    """Every entry of the SPARK_HOME `home` but `python/lib/pyspark.zip`, by its path
    relative to `home` (`python` and `python/lib` are folders of such entries): what a
    home that replaces or leaves out the zip links to."""
    out: dict[str, Path] = {}
    for entry in sorted(home.iterdir()):
        if entry.name != "python":
            out[entry.name] = entry
    python = home / "python"
    for entry in sorted(python.iterdir()):
        if entry.name != "lib":
            out[f"python/{entry.name}"] = entry
    for entry in sorted((python / "lib").iterdir()):
        if entry.name != _ZIP:
            out[f"python/lib/{entry.name}"] = entry
    return out


def _is_current(shadow: Path, links: Mapping[str, Path]) -> bool:
    for rel, target in links.items():
        p = shadow / rel
        if not p.is_symlink() or Path(os.readlink(p)) != target:
            return False
    return not (shadow / "python" / "lib" / _ZIP).exists()


_NO_HARD_LINKS = {errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.EOPNOTSUPP}
"""What `link` answers where a hard link cannot be made: another file system, links
forbidden (`fs.protected_hardlinks` for another user's files), too many."""


class _HardLinksRefused(Exception):
    pass


def shadow_home(home: Path, cache_dir: Path) -> Path | None:
    """The links directory for `home` under `cache_dir`, made once and reused; None
    when a directory of that name exists but is not a complete one.

    A running JVM loads classes through it, so a directory is never changed once made.
    Safe against other processes doing the same at the same time: each builds its own
    copy and renames it into place; a loser removes its copy and uses the winner's.
    Directories no installation uses any more are pruned (`prune_homes`)."""
    prune_homes(cache_dir)
    links = home_links(home)
    try:
        return _hard_linked(home, links, cache_dir)
    except _HardLinksRefused as e:
        logger.debug(
            "SPARK_HOME of symbolic links: no hard links from %s to %s (%s)", home, cache_dir, e
        )
    return _symlinked(home, links, cache_dir)


def _hard_linked(home: Path, links: Mapping[str, Path], cache_dir: Path) -> Path | None:
    """A directory of hard links to `home`'s files, named by the names it holds and the
    jars' inodes, sizes and times: virtualenvs holding the very same files (one wheel
    that uv linked into each) share it, and it stays whole when the virtualenv that made
    it is removed."""
    jars = sorted((home / "jars").glob("*.jar"))
    stamps = []
    for jar in jars:
        st = jar.stat()
        stamps.append(f"{jar.name} {st.st_size} {st.st_mtime_ns} {st.st_dev} {st.st_ino}")
    names = [j.name for j in jars]

    def whole(shadow: Path) -> bool:
        found = sorted(p.name for p in (shadow / "jars").glob("*.jar"))
        return not (shadow / "jars").is_symlink() and found == names

    def fill(tmp: Path) -> None:
        for rel, target in links.items():
            _link_tree(target, tmp / rel)

    return _placed(cache_dir, _key("hard", *links, *stamps), fill, whole)


def _link_tree(src: Path, dst: Path) -> None:
    """`dst` as `src`: its folders made, its files hard-linked, its symbolic links copied;
    byte code (`__pycache__`) left out."""
    if src.name == "__pycache__":
        return
    if src.is_symlink():
        dst.symlink_to(os.readlink(src))
    elif src.is_dir():
        dst.mkdir()
        for entry in sorted(src.iterdir()):
            _link_tree(entry, dst / entry.name)
    else:
        try:
            os.link(src, dst)
        except OSError as e:
            if e.errno in _NO_HARD_LINKS:
                raise _HardLinksRefused(f"{src}: {e.strerror}") from e
            raise


def _symlinked(home: Path, links: Mapping[str, Path], cache_dir: Path) -> Path | None:
    """A directory of symbolic links to `home`'s entries, named by `home` and the linked
    names (links are by path, so a pyspark upgraded in place with the same names is
    still linked right)."""

    def fill(tmp: Path) -> None:
        for rel, target in links.items():
            (tmp / rel).symlink_to(target)

    return _placed(
        cache_dir, _key(str(home), *links), fill, lambda shadow: _is_current(shadow, links)
    )


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _placed(
    cache_dir: Path, key: str, fill: Callable[[Path], None], whole: Callable[[Path], bool]
) -> Path | None:
    """`spark-home-<key>` under `cache_dir` when it is `whole`, None when it is not; made
    when missing: `fill`ed as a temporary folder (with `python/lib` made), then renamed
    into place, a winner's kept when another process renamed its own first."""
    shadow = cache_dir / f"spark-home-{key}"
    if shadow.exists():
        return shadow if whole(shadow) else None
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".spark-home-{key}-{uuid.uuid4().hex}"
    try:
        (tmp / "python" / "lib").mkdir(parents=True)
        fill(tmp)
        try:
            tmp.rename(shadow)
        except OSError:
            if not (shadow.exists() and whole(shadow)):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return shadow


def prune_homes(cache_dir: Path) -> list[Path]:
    """Remove the links directories of pyspark installations that are gone; returns
    those removed. Of symbolic links: a deleted virtualenv's, whose `bin` link dangles. Of
    hard links: one whose jars no other directory holds any more (no virtualenv, nor
    uv's cache). No JVM can still be loading classes through them: their pyspark is gone."""
    removed = []
    for shadow in cache_dir.glob("spark-home-*"):
        bin_link = shadow / "bin"
        if bin_link.is_symlink():
            gone = not bin_link.exists()
        else:
            jar = next((shadow / "jars").glob("*.jar"), None)
            try:
                gone = jar is None or jar.stat().st_nlink == 1
            except FileNotFoundError:  # another process is pruning it
                gone = False
        if gone:
            shutil.rmtree(shadow, ignore_errors=True)
            removed.append(shadow)
    if removed:
        logger.info("removed %d SPARK_HOME link directories of removed pysparks", len(removed))
    return removed


DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


def with_driver_options(conf: Mapping[str, str], flags: str) -> dict[str, str]:
    """`conf` with `flags` after the driver's Java options it has."""
    options = f"{conf.get(DRIVER_OPTIONS, '')} {flags}".strip()
    return {**conf, DRIVER_OPTIONS: options}


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory known for this user
            base = tempfile.gettempdir()
    return Path(base) / "spark-warehouse"


def launch_java(environ: Mapping[str, str]) -> Path | None:
    """The `java` Spark's launcher runs: `$JAVA_HOME/bin/java`, else the first on PATH."""
    home = environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    if java is None:
        found = shutil.which("java", path=environ.get("PATH"))
        java = Path(found) if found else None
    if java is None or not java.is_file():
        return None
    return java.resolve()


def launch_home(
    master: str, *, environ: Mapping[str, str], cache_dir: Path | None = None
) -> Path | None:
    """The SPARK_HOME to launch a session's JVM with, or None for Spark's default.

    `environ`: the variables the JVM will inherit (`PYSPARK_PYTHON` decides which
    interpreter runs the workers)."""
    if "SPARK_HOME" in environ or not master.startswith("local"):
        return None
    python = environ.get("PYSPARK_PYTHON")
    found = shutil.which(python) if python else None
    # Compared as paths, not resolved: two virtualenvs link to one base interpreter, and
    # the other one may not have pyspark installed (only the zip would give it one).
    if found is None or os.path.abspath(found) != os.path.abspath(sys.executable):
        return None
    home = installed_home()
    if home is None:
        return None
    cache = cache_dir or default_cache_dir(environ)
    try:
        shadow = shadow_home(home, cache)
    except OSError as e:  # no symlinks, a read-only cache: Spark's default still works
        logger.info(
            "keeping Spark's default SPARK_HOME (could not prepare one in %s): %s", cache, e
        )
        return None
    if shadow is None:
        logger.info("keeping Spark's default SPARK_HOME: %s holds an incomplete copy", cache)
    return shadow


@contextmanager
def launching(master: str, *, cache_dir: Path | None = None) -> Iterator[Path | None]:
    """Set SPARK_HOME (see `launch_home`) while a session's JVM is launched in the block;
    restored after. Yields the home used, or None."""
    home = launch_home(master, environ=os.environ, cache_dir=cache_dir)
    if home is None:
        yield None
        return
    os.environ["SPARK_HOME"] = str(home)
    logger.debug("launching Spark with SPARK_HOME=%s", home)
    try:
        yield home
    finally:
        os.environ.pop("SPARK_HOME", None)
