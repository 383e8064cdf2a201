"""Small real filesystems that fail on demand, for the broker's storage-error tests.

- `SmallTmpfs`: a tmpfs of a few MB. Filling it makes the next write that needs a
  new page fail with ENOSPC (a disk-full append).
- `ThinExt4`: ext4 on a loop device whose backing file is a sparse image on a
  small tmpfs, i.e. thin-provisioned storage. Filling the tmpfs underneath leaves
  ext4 believing it has free blocks: writes still succeed into the page cache and
  the next fsync fails when writeback cannot store the blocks (ENOSPC or EIO from
  the loop device), which is the failed fsync Kafka takes a log dir offline for.

Both need root (mount, losetup). Every mount and loop device is undone by
`close()`, which the context managers call whatever happened; nothing is left
mounted when a test fails. Not thread-safe; one test owns one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType

__all__ = ["SmallTmpfs", "ThinExt4", "require_root"]


def require_root() -> None:
    """Fail (not skip) when mounts cannot be made: a skipped storage-error test would pass
    without testing anything."""
    if os.geteuid() != 0:
        raise AssertionError(
            "storage-error tests mount a tmpfs and a loop device and need root; run them as "
            "root (the CI container is) or in a VM"
        )


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


def _fill(directory: Path) -> Path:
    """Write zeros into `directory/filler` until the filesystem is full."""
    path = directory / "filler"
    chunk = b"\0" * (1 << 16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(1 << 20):  # bounded: 64 GiB, far above any of these filesystems
            try:
                os.write(fd, chunk)
            except OSError:
                break
        # the last partial page as well, byte-sized writes until nothing fits
        for _ in range(1 << 16):
            try:
                if os.write(fd, b"\0") == 0:
                    break
            except OSError:
                break
    finally:
        os.close(fd)
    return path


class SmallTmpfs:
    """A `size`-byte tmpfs mounted at `mountpoint`."""

    def __init__(self, mountpoint: Path, size: int) -> None:
        self.mountpoint = Path(mountpoint)
        self.size = size
        self._mounted = False

    def __enter__(self) -> SmallTmpfs:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", str(self.mountpoint))
        self._mounted = True
        return self

    def fill(self) -> None:
        """Leave no free byte: the next write that needs a page fails with ENOSPC."""
        _fill(self.mountpoint)

    def free(self) -> None:
        (self.mountpoint / "filler").unlink(missing_ok=True)

    def close(self) -> None:
        if self._mounted:
            _run("umount", "-l", str(self.mountpoint))
            self._mounted = False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ThinExt4:
    """ext4 at `root/mnt` on a loop device over a sparse `image_size` image kept on a
    `backing_size` tmpfs at `root/backing` (backing_size < image_size: thin)."""

    def __init__(self, root: Path, *, image_size: int, backing_size: int) -> None:
        self.root = Path(root)
        self.mountpoint = self.root / "mnt"
        self.backing = SmallTmpfs(self.root / "backing", backing_size)
        self.image = self.backing.mountpoint / "ext4.img"
        self.image_size = image_size
        self.device: str | None = None
        self._mounted = False

    def __enter__(self) -> ThinExt4:
        try:
            self.backing.__enter__()
            with open(self.image, "wb") as f:
                f.truncate(self.image_size)
            # no lazy init: its background writes would fail once the backing is full
            _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                 str(self.image))  # fmt: skip
            self.device = _run("losetup", "-f", "--show", str(self.image)).strip()
            self.mountpoint.mkdir(parents=True, exist_ok=True)
            _run("mount", "-t", "ext4", self.device, str(self.mountpoint))
            self._mounted = True
        except BaseException:
            self.close()
            raise
        return self

    def fail_writeback(self) -> None:
        """Fill the storage under ext4: fsyncs of data written from now on fail."""
        _fill(self.backing.mountpoint)

    def restore(self) -> None:
        """Give the backing store room again, and remount (after a failed writeback ext4
        may have aborted its journal and gone read-only), checking the filesystem."""
        self.backing.free()
        if self._mounted:
            _run("umount", str(self.mountpoint))
            self._mounted = False
        assert self.device is not None
        # e2fsck exits 1 when it corrected errors, which is the expected case here
        subprocess.run(["e2fsck", "-p", self.device], capture_output=True, timeout=60)
        _run("mount", "-t", "ext4", self.device, str(self.mountpoint))
        self._mounted = True

    def close(self) -> None:
        if self._mounted:
            with contextlib.suppress(subprocess.CalledProcessError):
                _run("umount", str(self.mountpoint))
            self._mounted = False
            if os.path.ismount(self.mountpoint):
                _run("umount", "-l", str(self.mountpoint))
        if self.device is not None:
            _run("losetup", "-d", self.device)
            self.device = None
        self.backing.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
