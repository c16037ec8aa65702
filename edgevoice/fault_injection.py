"""Fault injection for the service tests: knobs read from the environment at start, never set in production.

``EDGEVOICE_FAULT_STALL_LISTENER_S=N``: N seconds after the loop starts, the listener thread blocks inside the voice
activity detector (as a hung engine would) until the process is told to stop, so it consumes no more microphone
audio. The service's watchdog must then kill and restart it (``tests/test_service_nspawn.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Mapping

from edgevoice.pipeline import Engines

log = logging.getLogger(__name__)

STALL_LISTENER = "EDGEVOICE_FAULT_STALL_LISTENER_S"


class StallingVad:
    """The real VAD until ``after_s`` seconds past the first frame, then a call that blocks until ``release``."""

    def __init__(self, vad: object, after_s: float, release: threading.Event) -> None:
        self._vad, self._after_s, self._release = vad, after_s, release
        self._start: float | None = None
        self.stalled = threading.Event()

    def probability(self, frame: object) -> float:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        if now - self._start >= self._after_s:
            if not self.stalled.is_set():
                log.warning("fault injection: the listener stalls now (%s)", STALL_LISTENER)
                self.stalled.set()
            self._release.wait()
        return float(self._vad.probability(frame))  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._vad, name)


def inject_faults(engines: Engines, release: threading.Event, environ: Mapping[str, str] | None = None) -> Engines:
    """``engines`` with the faults the environment asks for (unchanged when it asks for none)."""
    value = (os.environ if environ is None else environ).get(STALL_LISTENER)
    if not value:
        return engines
    log.warning("fault injection on: %s=%s", STALL_LISTENER, value)
    return dataclasses.replace(engines, vad=StallingVad(engines.vad, float(value), release))
