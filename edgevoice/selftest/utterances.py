"""The bundled utterances the self-test speaks to the appliance: questions about the sample venue, rendered once by
the default voice without its sampling noise (``scripts/make-selftest-utterances``) and shipped as 16 kHz FLAC."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np
import soundfile

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


UTTERANCES = (
    Utterance("ticket", "How much is a ticket for a student?"),
    Utterance("kids", "Is it free for kids?"),
    Utterance("whale", "Where is the whale skeleton?"),
    Utterance("jacket", "Where do I drop off my jacket?"),
    Utterance("cafe", "Is there a cafe in the museum?"),
    Utterance("hours", "What time do you open on Sunday?"),
    Utterance("toilets", "Where are the toilets, please?"),
    Utterance("photos", "Can I take photos inside?"),
    Utterance("tours", "Are there guided tours in English?"),
    Utterance("wifi", "Is there free Wi-Fi here?"),
)
