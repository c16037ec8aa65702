"""The private PulseAudio harness lives in the package (`edgevoice selftest` uses it too): :mod:`edgevoice.pulse`."""

from edgevoice.pulse import Player, PulseServer, Recorder, SinkSpec

__all__ = ["Player", "PulseServer", "Recorder", "SinkSpec"]
