"""The bundled utterances the self-test speaks to the appliance: questions about the sample venue (their texts in
``edgevoice/data/sample_venue/selftest_utterances.toml``), rendered once (``scripts/make-selftest-utterances``) and
shipped as 16 kHz FLAC. Most are in the kiosk's own voice without its sampling noise; the others are in voices that
are not the kiosk's (:mod:`edgevoice.bench.voices`), and some hold a pause inside the sentence (a ``|`` in the text),
where the appliance must wait for the rest rather than answer half a question."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import soundfile

from edgevoice import data
from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import SelftestError
from edgevoice.interfaces import FloatAudio

KIOSK_VOICE = "kiosk"
"""The voice name of the utterances rendered by the kiosk's own (default) voice."""
PAUSE_S = 0.6
"""The silence rendered where an utterance's text has a ``|``: a visitor's hesitation in mid-sentence."""


@dataclass(frozen=True)
class Utterance:
    name: str
    said: str
    """The words as spoken, a ``|`` where the speaker pauses."""
    voice: str = KIOSK_VOICE
    recording: FloatAudio | None = field(default=None, compare=False, repr=False)
    """The audio when it was rendered for this run (a benchmark's voices), instead of a bundled file."""

    @property
    def text(self) -> str:
        """The words, without the pause marks."""
        return " ".join(" ".join(self.parts).split())

    @property
    def parts(self) -> tuple[str, ...]:
        """The stretches spoken without a pause."""
        return tuple(p.strip() for p in self.said.split("|"))

    @property
    def paused(self) -> bool:
        return len(self.parts) > 1

    def audio(self) -> FloatAudio:
        """The recording, 16 kHz mono float32."""
        if self.recording is not None:
            return self.recording
        ref = resources.files("edgevoice.selftest").joinpath("utterances", f"{self.name}.flac")
        try:
            with resources.as_file(ref) as path:
                audio, rate = soundfile.read(str(path), dtype="float32")
        except (OSError, RuntimeError) as exc:
            raise SelftestError(f"bundled utterance {self.name}.flac is missing or unreadable: {exc}") from exc
        if rate != SAMPLE_RATE or audio.ndim != 1:
            raise SelftestError(f"bundled utterance {self.name}.flac is not 16 kHz mono")
        return np.asarray(audio, dtype=np.float32)


UTTERANCES = tuple(
    Utterance(u["name"], u["text"], u.get("voice", KIOSK_VOICE))
    for u in data.table("sample_venue/selftest_utterances.toml")["utterances"]
)
"""The bundled utterances, in the order the self-test speaks them (``edgevoice/data/sample_venue``)."""
