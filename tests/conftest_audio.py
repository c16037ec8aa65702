"""Fixtures for tests on real-time audio streams, through a private PulseAudio server (see ``tests/pulse.py``).

Register them in ``tests/conftest.py`` with ``from tests.conftest_audio import pulse  # noqa: F401``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from edgevoice.audio.pulse import PulseServer


def pulse_available() -> str | None:
    """Why the audio tests cannot run here, or None when they can."""
    missing = [tool for tool in ("pulseaudio", "pactl", "parec", "paplay") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (apt-get install pulseaudio pulseaudio-utils libasound2-plugins)"
    return None


@pytest.fixture
def pulse() -> Iterator[PulseServer]:
    """A fresh PulseAudio server with null sinks ``mic`` and ``spk`` (16 kHz mono), stopped after the test.

    This process is pointed at it (``PULSE_SERVER``, ``PULSE_COOKIE``) for the test's duration; choose the default
    source and sink of in-process PortAudio streams with ``pulse.environ(source=..., sink=...)``.
    """
    reason = pulse_available()
    if reason:
        pytest.skip(reason)
    with PulseServer() as server, server.environ():
        yield server
