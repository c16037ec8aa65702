"""A private PulseAudio server with null sinks: real-time audio on a machine without a sound card, for the tests and
for `edgevoice selftest` (see :mod:`edgevoice.pulse.server`)."""

from edgevoice.pulse.clients import Player, Recorder
from edgevoice.pulse.server import PulseServer, SinkSpec

__all__ = ["Player", "PulseServer", "Recorder", "SinkSpec"]
