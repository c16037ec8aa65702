"""The private PulseAudio harness lives in the package (`edgevoice selftest` uses it too): edgevoice.audio.pulse."""

from edgevoice.audio.pulse import Player, PulseServer, Recorder, SinkSpec

__all__ = ["Player", "PulseServer", "Recorder", "SinkSpec"]
