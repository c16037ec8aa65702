"""The files of the models a configuration names (``[models]``): a manifest name resolves to its verified installed
file (a former name with a warning), anything with a slash or a suffix is one's own file; the voice's and the sentence
encoder's companion files; a name for a voice and its settings."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from edgevoice.config import Config
from edgevoice.errors import ConfigError, ModelMissingError
from edgevoice.models.manifest import ModelSpec
from edgevoice.models.store import ModelStore

__all__ = [
    "embedder_files",
    "manifest_model",
    "model_store",
    "moonshine_files",
    "piper_files",
    "resolve",
    "voice_id",
]

log = logging.getLogger(__name__)


def model_store(config: Config) -> ModelStore:
    return ModelStore(Path(config.models.dir).expanduser() if config.models.dir else None)


def manifest_model(store: ModelStore, key: str, value: str) -> ModelSpec | None:
    """The manifest's model that ``models.<key> = value`` names (a former name logs a warning), or None: a path."""
    spec = store.manifest.find(value)
    if spec is not None and spec.name != value:
        log.warning("models.%s: %s", key, store.manifest.former_name(value))
    return spec


def resolve(store: ModelStore, key: str, value: str, *, file: str | None = None) -> Path:
    """A manifest name resolves to its verified installed file; anything with a slash or suffix is a path."""
    if spec := manifest_model(store, key, value):
        return store.path(spec.name, file)
    path = Path(value).expanduser()
    if "/" in value or path.suffix:
        if not path.is_file():
            raise ModelMissingError(f"models.{key} = {value!r}: no such file")
        return path
    known = ", ".join(sorted(store.manifest.models))
    raise ConfigError(f"models.{key} = {value!r}: not a model in the manifest ({known}) nor a file path")


def piper_files(store: ModelStore, value: str) -> tuple[Path, Path]:
    if spec := manifest_model(store, "tts", value):
        onnx = next(o.file for o in spec.outputs if o.file.endswith(".onnx"))
        return store.path(spec.name, onnx), store.path(spec.name, onnx + ".json")
    model = resolve(store, "tts", value)
    return model, model.with_name(model.name + ".json")


def moonshine_files(store: ModelStore, name: str) -> tuple[Path, Path, Path]:
    """A Moonshine model's verified encoder, decoder and tokenizer (its manifest outputs in that order)."""
    spec = store.manifest.get(name)
    encoder, decoder, tokenizer = (store.path(spec.name, out.file) for out in spec.outputs)
    return encoder, decoder, tokenizer


def voice_id(store: ModelStore, files: tuple[Path, ...], settings: str) -> str:
    """A name for a voice and its settings (the key of its cached audio): the checksums of its files (the
    manifest's, for an installed model; else hashed now) and ``settings``."""
    digest = hashlib.sha256()
    for path in files:
        handed = store.handed_out.get(path)
        if handed is not None:
            digest.update(handed[1].sha256.encode())
        else:
            with path.open("rb") as fh:
                digest.update(hashlib.file_digest(fh, "sha256").hexdigest().encode())
    digest.update(settings.encode())
    return digest.hexdigest()[:32]


def embedder_files(store: ModelStore, value: str) -> dict[str, Path]:
    """The embedding model's files: ``weights``, ``tokenizer``, ``config`` and ``pooling`` (the last two may be
    missing for one's own model). ``value``: a manifest name, or a sentence-transformers model folder (or its
    ``model.safetensors``) with ``tokenizer.json``, ``config.json`` and ``1_Pooling/config.json`` beside it."""
    if spec := manifest_model(store, "embed", value):
        kinds = {
            "weights": ".safetensors",
            "tokenizer": "tokenizer.json",
            "config": "config.json",
            "pooling": "pooling.json",
        }
        return {
            kind: store.path(spec.name, out.file)
            for kind, suffix in kinds.items()
            for out in spec.outputs
            if out.file.endswith(suffix)
        }
    path = Path(value).expanduser()
    folder = path if path.is_dir() else path.parent
    weights = folder / "model.safetensors" if path.is_dir() else resolve(store, "embed", value)
    files = {"weights": weights, "tokenizer": folder / "tokenizer.json"}
    files |= {"config": folder / "config.json", "pooling": folder / "1_Pooling" / "config.json"}
    for kind in ("weights", "tokenizer"):
        if not files[kind].is_file():
            raise ModelMissingError(f"models.embed = {value!r}: no {files[kind]}")
    return {kind: p for kind, p in files.items() if p.is_file()}
