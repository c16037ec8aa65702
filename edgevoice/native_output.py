"""Keeping native libraries' chatter out of the user's terminal."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Redirect file descriptor 2 to /dev/null for the duration (C libraries print there directly: llama.cpp's load
    log, PortAudio's ALSA and JACK probing). Other threads' stderr is lost meanwhile: keep the block short."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
