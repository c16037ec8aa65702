"""The bundled utterances the self-test speaks to the appliance: questions about the sample venue (their texts in
``edgevoice/data/sample_venue/selftest_utterances.toml``), rendered once by the default voice without its sampling
noise (``scripts/make-selftest-utterances``) and shipped as 16 kHz FLAC."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np
import soundfile

from edgevoice import data
from edgevoice.errors import SelftestError
from edgevoice.interfaces import FloatAudio

RATE = 16000


@dataclass(frozen=True)
class Utterance:
    name: str
    text: str

    def audio(self) -> FloatAudio:
        """The recording, 16 kHz mono float32."""
        ref = resources.files("edgevoice.selftest").joinpath("utterances", f"{self.name}.flac")
        try:
            with resources.as_file(ref) as path:
                audio, rate = soundfile.read(str(path), dtype="float32")
        except (OSError, RuntimeError) as exc:
            raise SelftestError(f"bundled utterance {self.name}.flac is missing or unreadable: {exc}") from exc
        if rate != RATE or audio.ndim != 1:
            raise SelftestError(f"bundled utterance {self.name}.flac is not 16 kHz mono")
        return np.asarray(audio, dtype=np.float32)


UTTERANCES = tuple(
    Utterance(u["name"], u["text"]) for u in data.table("sample_venue/selftest_utterances.toml")["utterances"]
)
"""The bundled utterances, in the order the self-test speaks them (``edgevoice/data/sample_venue``)."""
