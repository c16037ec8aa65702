"""A private PulseAudio server with null sinks: real-time audio on a machine without a sound card, for the tests and
for `edgevoice selftest` (see :mod:`edgevoice.audio.pulse.server`)."""

from edgevoice.audio.pulse.clients import Player, Recorder
from edgevoice.audio.pulse.server import PulseServer, SinkSpec

__all__ = ["Player", "PulseServer", "Recorder", "SinkSpec"]
