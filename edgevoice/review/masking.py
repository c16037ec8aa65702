"""What is masked in a text before the review inbox stores it: numbers that look like a phone, card or ID number,
and e-mail addresses. The patterns are data (``edgevoice/data/review/masking.toml``); prices, times and counts stay
readable ("14 euros", "9:30")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from edgevoice import data
from edgevoice.errors import ConfigError

__all__ = ["Mask", "mask_text", "masks"]

MASKS_FILE = "review/masking.toml"


@dataclass(frozen=True)
class Mask:
    """One kind of thing masked: its name, its pattern and what replaces each match."""

    name: str
    pattern: re.Pattern[str]
    replacement: str


@cache
def masks() -> tuple[Mask, ...]:
    """The masks of :data:`MASKS_FILE`, in order; a ConfigError naming the file and mask when one is malformed."""
    out = []
    for i, row in enumerate(data.table(MASKS_FILE).get("mask", [])):
        where = f"edgevoice/data/{MASKS_FILE}: mask {i + 1}"
        try:
            pattern = re.compile(str(row["pattern"]), re.IGNORECASE)
            out.append(Mask(str(row.get("name", where)), pattern, str(row["replacement"])))
        except KeyError as exc:
            raise ConfigError(f"{where}: needs {exc.args[0]!r}") from None
        except re.error as exc:
            raise ConfigError(f"{where}: the pattern is not a regular expression ({exc})") from None
    return tuple(out)


def mask_text(text: str, kinds: tuple[Mask, ...] | None = None) -> str:
    """``text`` with every match of each mask replaced, in order."""
    for mask in masks() if kinds is None else kinds:
        text = mask.pattern.sub(mask.replacement, text)
    return text
