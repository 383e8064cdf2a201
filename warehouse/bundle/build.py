"""Build a relocatable archive of a virtual environment for Spark executors.

`venv-pack` packs a venv into an archive whose `bin/python` works wherever it is
unpacked (`spark-submit --archives env.tar.gz#env` with
`spark.pyspark.python=./env/bin/python`). It refuses editable installs, because an
editable install is only a pointer to a source folder that the executors do not
have, and the development venv has this project installed editable. So the archive
is packed from a staging venv instead:

1. a new venv (same base interpreter, no pip) in a temporary folder;
2. the source venv's site-packages linked (or copied) into it, minus the editable
   pointers (`__editable__*`, their `.dist-info`) and `pyspark` unless asked for: a
   cluster's executors import the cluster's own pyspark (Spark puts
   `$SPARK_HOME/python/lib/pyspark.zip` first on the Python workers' path), and the
   jars in the wheel are half the size of the environment;
3. each editable project built into a wheel (`pip wheel --no-deps`) and installed
   into the staging venv with `--no-deps`, so the archive carries the project's code;
4. the byte code of everything in it compiled where missing or stale (`compileall`):
   the archive's `bin/python` is the base interpreter this venv runs, so its byte code
   is valid on the executors, and each executor's first Python worker reads it instead
   of compiling pandas, pyarrow and the project from source (with
   `PYTHONDONTWRITEBYTECODE`, every worker would);
5. `venv_pack.pack` of the staging venv; the staging folder is removed.

The archive does not contain the interpreter: `bin/python` links to the base
Python (`BundleResult.base_python`), which must exist at that path on the
executors, or pass `python_prefix` for where it lives there.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from warehouse.bundle.errors import BundleArgumentError, BundleError

logger = logging.getLogger(__name__)

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar", ".zip")
_PYSPARK = ("pyspark",)


@dataclass(frozen=True)
class BundleResult:
    """What `build_bundle` wrote: `path` (the archive), its size, the editable projects
    it rebuilt as wheels, the extra wheels it installed, whether pyspark is inside, and
    `base_python`, the interpreter `bin/python` in the archive points to."""

    path: Path
    size_bytes: int
    base_python: str
    editable: list[str] = field(default_factory=list)
    wheels: list[str] = field(default_factory=list)
    includes_pyspark: bool = False

    def spark_submit_args(self, alias: str = "env") -> list[str]:
        """The `spark-submit` options that ship this archive to the executors."""
        return [
            "--archives",
            f"{self.path}#{alias}",
            "--conf",
            f"spark.pyspark.python=./{alias}/bin/python",
        ]


def site_packages(venv: Path) -> Path:
    """The venv's `lib/pythonX.Y/site-packages` (exactly one)."""
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise BundleArgumentError(
            f"Cannot find one site-packages folder under `{venv}/lib` (found {len(found)}). "
            "Pass the root of a virtual environment (the folder with pyvenv.cfg).",
            path=venv,
        )
    return found[0]


def editable_distributions(site: Path) -> dict[str, Path]:
    """Distribution name -> source folder of every editable install in `site`
    (PEP 610 `direct_url.json` with `dir_info.editable`)."""
    found: dict[str, Path] = {}
    for info in sorted(site.glob("*.dist-info")):
        try:
            direct = json.loads((info / "direct_url.json").read_text())
        except (OSError, ValueError):
            continue
        if direct.get("dir_info", {}).get("editable") and str(direct.get("url", "")).startswith(
            "file:"
        ):
            name = info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
            found[name] = Path(unquote(urlparse(direct["url"]).path))
    return found


def _base_python(venv: Path) -> str:
    cfg = venv / "pyvenv.cfg"
    values = {}
    for line in cfg.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    if "executable" in values:
        return values["executable"]
    python = venv / "bin" / "python"
    return os.path.realpath(python)


def _link_or_copy(src: str, dst: str) -> str:
    # Hard links keep staging fast and free when the work folder shares the venv's disk.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _skip(editable: dict[str, Path], include_pyspark: bool):
    editable_infos = {n.lower().replace("-", "_") for n in editable}

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped: set[str] = set()
        if Path(folder).name == "__pycache__" and Path(folder).parent.name == "site-packages":
            return {n for n in names if n.startswith("__editable__")}
        if Path(folder).name != "site-packages":
            return skipped
        for n in names:
            dist = n.removesuffix(".dist-info").rsplit("-", 1)[0].lower().replace("-", "_")
            if n.startswith("__editable__") or (
                n.endswith(".dist-info") and dist in editable_infos
            ):
                skipped.add(n)
            elif not include_pyspark and (
                n in _PYSPARK or (n.endswith(".dist-info") and dist in _PYSPARK)
            ):
                skipped.add(n)
        return skipped

    return ignore


def _run(cmd: Sequence[str], what: str) -> None:
    logger.info("bundle: %s: %s", what, " ".join(cmd))
    done = subprocess.run(list(cmd), capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(
            f"{what} failed (exit {done.returncode}): `{' '.join(cmd)}`\n{done.stderr.strip()[-3000:]}"
        )


def _compile(python: str, site: Path) -> None:
    """Byte code for every module under `site` that has none or a stale one. Files that
    do not compile (test data of some packages) cannot be imported either: they are
    counted in the log, not an error."""
    cmd = [python, "-m", "compileall", "-q", "-j", "0", str(site)]
    logger.info("bundle: compiling byte code: %s", " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        failed = done.stdout.count("***")
        logger.info("bundle: %d file(s) under %s did not compile; left as source", failed, site)


def _check_arguments(out: Path, source: Path, wheels: list[Path], *, force: bool) -> None:
    """The venv is one, the archive's name has a known suffix and may be written, and
    every wheel is a .whl file."""
    if not (source / "pyvenv.cfg").is_file():
        raise BundleArgumentError(
            f"`{source}` is not a virtual environment (no pyvenv.cfg). Create one with "
            "`python -m venv`, install the project into it, and pass it with `--venv`.",
            path=source,
        )
    if not out.name.endswith(ARCHIVE_SUFFIXES):
        raise BundleArgumentError(
            f"Archive name `{out.name}` has no known suffix; use one of "
            + ", ".join(f"`{s}`" for s in ARCHIVE_SUFFIXES)
            + " (e.g. `env.tar.gz`).",
            path=out,
        )
    if out.exists() and not force:
        raise BundleArgumentError(f"`{out}` already exists. Remove it or pass `--force`.", path=out)
    for w in wheels:
        if not w.is_file() or w.suffix != ".whl":
            raise BundleArgumentError(f"Wheel `{w}` is not a .whl file.", path=w)


def _editable_wheels(python: str, editable: dict[str, Path], wheel_dir: Path) -> list[Path]:
    """A wheel of each editable install, built into `wheel_dir`."""
    if not editable:
        return []
    for name, folder in editable.items():
        if not (folder / "pyproject.toml").is_file() and not (folder / "setup.py").is_file():
            raise BundleError(
                f"Editable install `{name}` points to `{folder}`, which has no "
                "pyproject.toml or setup.py to build a wheel from. Reinstall it "
                "non-editable (`pip install .`) or pass its wheel with `--wheel`.",
                path=folder,
            )
        _run(
            [python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(folder)],
            f"building a wheel of the editable install `{name}`",
        )
    return sorted(wheel_dir.glob("*.whl"))


def build_bundle(
    output: Path | str,
    *,
    venv: Path | str | None = None,
    include_pyspark: bool = False,
    wheels: Sequence[Path | str] = (),
    python_prefix: str | None = None,
    work_dir: Path | str | None = None,
    force: bool = False,
    compress_level: int = 4,
) -> BundleResult:
    """Pack `venv` (default: the running one) into the archive `output`, with every
    editable project rebuilt as a wheel and `wheels` installed (both `--no-deps`:
    dependencies come from the venv as it is). See the module docstring for why."""
    try:
        import venv_pack
    except ImportError as e:
        raise BundleError(
            "`venv-pack` is not installed. Install the bundle extra: "
            "`pip install 'spark-warehouse[bundle]'` (or `pip install venv-pack`)."
        ) from e
    out = Path(output).absolute()
    source = Path(venv if venv is not None else sys.prefix).absolute()
    extra = [Path(w).absolute() for w in wheels]
    _check_arguments(out, source, extra, force=force)
    site = site_packages(source)
    editable = editable_distributions(site)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging_root = Path(tempfile.mkdtemp(prefix=".warehouse-bundle-", dir=work_dir or out.parent))
    try:
        staging = staging_root / "env"
        python = str(source / "bin" / "python")
        _run([python, "-m", "venv", "--without-pip", str(staging)], "creating the staging venv")
        target = site_packages(staging)
        shutil.rmtree(target)
        shutil.copytree(
            site,
            target,
            symlinks=True,
            copy_function=_link_or_copy,
            ignore=_skip(editable, include_pyspark),
        )
        install = _editable_wheels(python, editable, staging_root / "wheels") + extra
        if install:
            _run(
                [
                    python,
                    "-m",
                    "pip",
                    "--python",
                    str(staging / "bin" / "python"),
                    "install",
                    "--no-deps",
                    "--no-index",
                    "-q",
                    *map(str, install),
                ],
                "installing the project wheels",
            )
        _compile(python, target)
        logger.info("bundle: packing %s into %s", staging, out)
        venv_pack.pack(
            prefix=str(staging),
            output=str(out),
            force=force,
            compress_level=compress_level,
            python_prefix=python_prefix,
        )
    except venv_pack.VenvPackException as e:
        raise BundleError(f"venv-pack could not pack `{source}`: {e}", path=source) from e
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
    return BundleResult(
        path=out,
        size_bytes=out.stat().st_size,
        base_python=python_prefix or _base_python(source),
        editable=sorted(editable),
        wheels=[w.name for w in extra],
        includes_pyspark=include_pyspark,
    )
