"""The wheel `pip wheel .` builds: with the two C extensions for this platform, or, with
`WAREHOUSE_PURE_WHEEL=1` (setup.py), without them for any platform."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = {"streams/kafka/_rdfetch", "streams/landing/_flatjson"}


def _wheel(tmp_path: Path, pure: str) -> tuple[str, list[str]]:
    # A copy of the sources: an in-tree build writes `build/` beside them.
    src = tmp_path / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for pkg in ("streams", "warehouse"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=skip)
    out = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"] + ["-w", str(out), str(src)],
        env={**os.environ, "WAREHOUSE_PURE_WHEEL": pure},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel.name, zipfile.ZipFile(wheel).namelist()


@pytest.mark.timeout(300)
def test_the_wheel_has_the_extensions_and_the_pure_one_has_none(tmp_path) -> None:
    name, files = _wheel(tmp_path / "native", "")
    assert not name.endswith("-py3-none-any.whl"), name
    built = {f.split(".")[0] for f in files if f.endswith(".so")}
    assert built == EXTENSIONS, files
    name, files = _wheel(tmp_path / "pure", "1")
    assert name.endswith("-py3-none-any.whl"), name
    assert not [f for f in files if f.endswith((".so", ".pyd"))]
    assert "streams/kafka/fetch.py" in files and "streams/landing/arrow_json.py" in files
