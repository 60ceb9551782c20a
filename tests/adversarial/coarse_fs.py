"""A directory on a filesystem that stamps files with the kernel's coarse clock.

ext2 stamps a write with the clock as it was at the kernel's last tick (every 1 to
10 ms), as ext4 and xfs do before Linux 6.13 (Ubuntu 24.04, Debian 12, RHEL 9), so two
writes within one tick leave the same mtime. The directory is a loop-mounted ext2
image: that needs root and loop devices, and where the machine refuses (not root, no
``mkfs.ext2``, a container without the right to mount) the tests skip, saying why.
They also skip where the kernel stamps ext2 files finely, since no write there shares
a stamp and the tests would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

IMAGE_BYTES = 64 * 1024 * 1024


@contextmanager
def ext2_mount(where: Path) -> Iterator[Path]:
    """An empty, writable, loop-mounted ext2 filesystem under ``where``, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted ext2 image needs root (mount -o loop)")
    mkfs = shutil.which("mkfs.ext2") or shutil.which("mke2fs")
    if mkfs is None:
        pytest.skip("no mkfs.ext2 to make an ext2 image with (e2fsprogs)")
    image, mnt = where / "coarse.img", where / "coarse"
    mnt.mkdir()
    with image.open("wb") as file:
        file.truncate(IMAGE_BYTES)
    subprocess.run([mkfs, "-q", "-F", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        refused = (mounted.stderr.strip().splitlines() or ["no reason given"])[0]
        pytest.skip(f"mount -o loop refused here: {refused}")
    try:
        if not _stamps_coarsely(mnt):
            pytest.skip("this kernel stamps ext2 files finely: no two writes share a stamp")
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _stamps_coarsely(mnt: Path) -> bool:
    probe = mnt / "probe"
    stamps = []
    for i in range(200):
        probe.write_text(str(i % 10))
        stamps.append(probe.stat().st_mtime_ns)
    probe.unlink()
    return len(set(stamps)) < len(stamps)
