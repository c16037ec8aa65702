"""Default locations on disk. Nothing here touches the disk; callers create what they need."""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_MODELS_DIR = Path("/var/lib/edgevoice/models")
SYSTEM_CONFIG = Path("/etc/edgevoice/edgevoice.toml")


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def default_models_dir() -> Path:
    """``$EDGEVOICE_MODELS_DIR``, else ``$XDG_DATA_HOME/edgevoice/models`` (``~/.local/share/edgevoice/models``)."""
    override = os.environ.get("EDGEVOICE_MODELS_DIR")
    if override:
        return Path(override)
    return _xdg("XDG_DATA_HOME", ".local/share") / "edgevoice" / "models"


def default_download_cache() -> Path:
    """Where downloaded model packages are kept between installs (``$XDG_CACHE_HOME/edgevoice/downloads``)."""
    override = os.environ.get("EDGEVOICE_DOWNLOAD_CACHE")
    if override:
        return Path(override)
    return _xdg("XDG_CACHE_HOME", ".cache") / "edgevoice" / "downloads"


def default_cache_dir() -> Path:
    """Where derived data is kept between starts (the knowledge's embeddings): ``$EDGEVOICE_CACHE_DIR``, else the
    service's ``$CACHE_DIRECTORY`` (systemd's ``CacheDirectory=``), else ``$XDG_CACHE_HOME/edgevoice``."""
    for var in ("EDGEVOICE_CACHE_DIR", "CACHE_DIRECTORY"):
        value = os.environ.get(var)
        if value:
            return Path(value.split(":")[0])
    return _xdg("XDG_CACHE_HOME", ".cache") / "edgevoice"


def repo_manifest() -> Path:
    """The model manifest shipped with edgevoice (``models/manifest.toml`` beside the package)."""
    override = os.environ.get("EDGEVOICE_MANIFEST")
    if override:
        return Path(override)
    packaged = Path(__file__).with_name("manifest.toml")
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "models" / "manifest.toml"
