"""Reading a configuration: TOML from a file (``--config``, ``$EDGEVOICE_CONFIG``, ./edgevoice.toml or
/etc/edgevoice/edgevoice.toml) checked key by key against the sections declared in :mod:`edgevoice.config`, every
error naming its key."""

from __future__ import annotations

import dataclasses
import logging
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from edgevoice.config import Config
from edgevoice.errors import ConfigError, ConfigErrors
from edgevoice.paths import SYSTEM_CONFIG

log = logging.getLogger(__name__)


def load_config(path: Path | str | None = None) -> Config:
    """Read and validate a TOML config; ``None`` gives the defaults."""
    if path is None:
        return Config()
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text") from exc
    config = config_from_dict(raw, source=str(path))
    return dataclasses.replace(config, source=str(path))


def config_from_dict(raw: dict[str, Any], *, source: str = "the configuration") -> Config:
    """Build a validated :class:`Config` from parsed TOML (nested tables).

    Every error of the tables is found before any is raised: one is raised as it is, several together as
    :class:`~edgevoice.errors.ConfigErrors` (``source`` names the file in its message)."""
    errors: list[ConfigError] = []
    config = _build(Config, raw, "", errors)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors, source)
    return typing.cast(Config, config)


REMOVED_KEYS = {
    "kiosk.verify_below": "every reply of the model is checked now, however well the knowledge covers its question",
}
"""Keys earlier versions had, with why they went: a configuration that still sets one loads, with a warning, so an
upgraded kiosk starts."""


def _build(cls: type, raw: dict[str, Any], prefix: str, errors: list[ConfigError]) -> object | None:
    """An instance of the section ``cls`` from its table, or None when the table has errors (added to ``errors``,
    in the order of the file)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
    for name in [n for n in raw if f"{prefix}{n}" in REMOVED_KEYS]:
        log.warning("%s%s is no longer used and is ignored: %s", prefix, name, REMOVED_KEYS[f"{prefix}{name}"])
        raw = {k: v for k, v in raw.items() if k != name}
    found = len(errors)
    values: dict[str, object] = {}
    for name, value in raw.items():
        key = f"{prefix}{name}"
        if name not in fields:
            errors.append(ConfigError(f"{key}: unknown key (allowed here: {', '.join(sorted(fields))})", key=key))
            continue
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                errors.append(ConfigError(f"{key} = {value!r}: must be a table [{key}]", key=key))
            elif (section := _build(typing.cast(type, hint), value, f"{key}.", errors)) is not None:
                values[name] = section
            continue
        try:
            values[name] = _check_value(key, value, hint, fields[name].metadata)
        except ConfigError as exc:
            errors.append(_keyed(exc, key))
    if len(errors) > found:
        return None
    try:
        return cls(**values)
    except ConfigError as exc:  # a rule between keys of the table (its __post_init__)
        errors.append(_keyed(exc, prefix.rstrip(".") or None))
        return None


def _keyed(exc: ConfigError, key: str | None) -> ConfigError:
    if exc.key is None:
        exc.key = key
    return exc


def _check_value(key: str, value: object, hint: object, meta: types.MappingProxyType[str, Any]) -> object:
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        if value not in allowed:
            raise ConfigError(f"{key} = {value!r}: must be one of {', '.join(map(repr, allowed))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} = {value!r}: must be a whole number")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r}: must be a number")
        value = float(value)
    elif hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: must be a string")
        if "check" in meta:
            meta["check"](key, value)
        return value
    elif hint == tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key} = {value!r}: must be a list of strings")
        value = tuple(value)
        if "check" in meta:
            meta["check"](key, value)
        return value
    if "range" in meta:
        lo, hi = meta["range"]
        assert isinstance(value, (int, float))
        if not lo <= value <= hi:
            raise ConfigError(f"{key} = {value!r}: must be between {lo} and {hi}")
    return value


def find_config(explicit: str | None) -> Config:
    """``--config``, else ``$EDGEVOICE_CONFIG``, else ./edgevoice.toml, else /etc/edgevoice/edgevoice.toml.

    With none of them, the defaults."""
    return load_config(config_path(explicit))


def config_path(explicit: str | None) -> Path | None:
    """The file :func:`find_config` reads; None: none, the defaults."""
    for candidate in (explicit, os.environ.get("EDGEVOICE_CONFIG")):
        if candidate:
            return Path(candidate)
    for path in (Path("edgevoice.toml"), SYSTEM_CONFIG):
        if path.is_file():
            return path
    return None
