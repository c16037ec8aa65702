"""What a configuration field may carry besides its type: its allowed range (checked at load)."""

from __future__ import annotations


def rng(lo: float, hi: float) -> dict[str, tuple[float, float]]:
    """A field's metadata for a number that must lie in ``[lo, hi]``."""
    return {"range": (lo, hi)}
