"""Writing configuration files: a base file (or the defaults) with some keys changed, validated before it is kept.

Used by `edgevoice tune` (the fastest settings found on this box) and by the benchmarks (configurations compared side
by side). The result is always re-read with :func:`edgevoice.config.load.load_config`, so a written file is one
that loads.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from edgevoice.atomic_write import atomic_write
from edgevoice.config import Config
from edgevoice.config.load import load_config
from edgevoice.errors import ConfigError

Overrides = Mapping[str, Mapping[str, Any]]
"""``{"section": {"key": value}}``."""


def merged(base: Path | str | None, overrides: Overrides) -> dict[str, Any]:
    """The raw tables of ``base`` (a TOML file; None: no keys) with ``overrides`` applied."""
    raw: dict[str, Any] = {}
    if base is not None:
        try:
            raw = tomllib.loads(Path(base).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {base} cannot be read as TOML: {exc}") from exc
    for section, values in overrides.items():
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{section} = {table!r}: must be a table [{section}]")
        table.update(values)
    return raw


def write_config(path: Path | str, overrides: Overrides, *, base: Path | str | None = None, header: str = "") -> Config:
    """Write ``base`` with ``overrides`` to ``path`` (atomically, after validating it) and return it loaded."""
    path = Path(path)
    text = tomli_w.dumps(merged(base, overrides))
    if header:
        text = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + "\n" + text
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, check=load_config)  # a file that would not load replaces nothing
    return load_config(path)
