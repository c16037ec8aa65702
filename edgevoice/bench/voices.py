"""Voices that are not the kiosk's own, for the spoken half of the venue benchmark.

- ``espeak-ng`` (Debian package ``espeak-ng``): formant synthesis, American and British English and their
  variants, run as the ``espeak-ng`` binary writing WAV to stdout.
- Festival (Debian packages ``festival`` and a ``festvox-*`` voice): ``festival-kal`` is the American male
  diphone voice ``kal_diphone`` (``festvox-kallpc16k``, 16 kHz), ``festival-slt`` the American female HTS voice
  ``cmu_us_slt_arctic_hts`` (``festvox-us-slt-hts``, 32 kHz, 1 MB): two more synthesis methods, each run as
  ``text2wave`` writing a temporary WAV.
- ``hibari`` (``hibari-tts`` on the package index): a 7.9 MB voice distilled from Kokoro; only its default voice
  (``heart``, American female) ships in the wheel, the others are downloaded on first use, so only it is offered.

The kiosk's own Piper voice moved in pitch and tempo (:data:`edgevoice.bench.audio_set.VOICES`) stays available
under the names ``piper-joe`` and the like; it is not among the defaults, which are three other synthesis
methods, two accents and both sexes: neural (hibari, female, American), formant (espeak-ng, male, British) and
diphone (Festival, male, American).
"""

from __future__ import annotations

import io
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.files import to_model_rate
from edgevoice.bench.audio_set import VOICES, FloatAudio
from edgevoice.errors import ConfigError

__all__ = ["DEFAULT_VOICES", "FESTIVAL", "SpeakFn", "voice_names", "voice_speaker"]

SpeakFn = Callable[[str], FloatAudio]
"""Text to 16 kHz mono audio."""

ESPEAK = ("en-us", "en-gb", "en-us+f3", "en-gb+m3")
FESTIVAL = {"kal": ("kal_diphone", "festvox-kallpc16k"), "slt": ("cmu_us_slt_arctic_hts", "festvox-us-slt-hts")}
"""Short name -> (Festival voice, the Debian package that installs it)."""
DEFAULT_VOICES = ("hibari-heart", "espeak-en-gb+m3", "festival-kal")


def voice_names() -> tuple[str, ...]:
    return (
        "hibari-heart",
        *(f"espeak-{v}" for v in ESPEAK),
        *(f"festival-{v}" for v in FESTIVAL),
        *(f"piper-{v.name}" for v in VOICES),
    )


@dataclass(frozen=True)
class _Espeak:
    voice: str

    def __call__(self, text: str) -> FloatAudio:
        try:
            done = subprocess.run(
                ["espeak-ng", "-v", self.voice, "--stdout", text], capture_output=True, check=True, timeout=300
            )
        except FileNotFoundError as exc:
            raise ConfigError("espeak-ng is not installed (Debian: apt-get install espeak-ng)") from exc
        audio, rate = soundfile.read(io.BytesIO(done.stdout), dtype="float32")
        return to_model_rate(np.asarray(audio, np.float32), rate, SAMPLE_RATE)


@dataclass(frozen=True)
class _Festival:
    voice: str
    package: str

    def __call__(self, text: str) -> FloatAudio:
        with tempfile.TemporaryDirectory(prefix="edgevoice-festival-") as folder:
            wav = Path(folder) / "speech.wav"
            try:
                done = subprocess.run(
                    ["text2wave", "-eval", f"(voice_{self.voice})", "-o", str(wav)],
                    input=text.encode(),
                    capture_output=True,
                    timeout=300,
                )
            except FileNotFoundError as exc:
                missing = f"Festival is not installed (Debian: apt-get install festival {self.package})"
                raise ConfigError(missing) from exc
            # text2wave exits 0 without writing a file when the voice is missing
            if done.returncode != 0 or not wav.is_file():
                error = done.stderr.decode(errors="replace").strip()
                raise ConfigError(
                    f"Festival voice {self.voice} gave no speech ({error or done.returncode}; Debian: apt-get "
                    f"install {self.package})"
                )
            audio, rate = soundfile.read(wav, dtype="float32")
        return to_model_rate(np.asarray(audio, np.float32), rate, SAMPLE_RATE)


@cache
def _hibari() -> Any:
    from hibari import Hibari

    return Hibari()


def _hibari_heart(text: str) -> FloatAudio:
    audio = _hibari()(text, seed=0)
    return to_model_rate(np.asarray(audio, np.float32), 24000, SAMPLE_RATE)


def voice_speaker(name: str, piper: Callable[[str, float], tuple[FloatAudio, int]] | None = None) -> SpeakFn:
    """The voice called ``name`` (:func:`voice_names`); ``piper(text, length_scale)`` renders the kiosk's voice."""
    if name == "hibari-heart":
        return _hibari_heart
    if name.startswith("espeak-") and name.removeprefix("espeak-") in ESPEAK:
        return _Espeak(name.removeprefix("espeak-"))
    if name.startswith("festival-") and name.removeprefix("festival-") in FESTIVAL:
        return _Festival(*FESTIVAL[name.removeprefix("festival-")])
    shifted = {f"piper-{v.name}": v for v in VOICES}
    if name in shifted:
        if piper is None:
            raise ConfigError(f"voice {name!r} needs the kiosk's Piper voice")
        voice = shifted[name]
        return lambda text: voice.render(piper, text)
    raise ConfigError(f"voice {name!r}: not one of {', '.join(voice_names())}")
