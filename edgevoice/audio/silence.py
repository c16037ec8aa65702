"""Silence handed out by the audio callbacks without allocating: one read-only block of zeros, made again only when
a longer one is asked for."""

from __future__ import annotations

import numpy as np

from edgevoice.interfaces import FloatAudio


class Silence:
    """``silence(n)``: ``n`` float32 zeros, read only, a view of a block kept between calls."""

    def __init__(self) -> None:
        self._block = np.zeros(0, np.float32)

    def __call__(self, n: int) -> FloatAudio:
        if len(self._block) < n:
            self._block = np.zeros(n, np.float32)
            self._block.flags.writeable = False
        return self._block[:n]
