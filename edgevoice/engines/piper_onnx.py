"""Piper voices run in edgevoice's own ONNX Runtime session.

piper-tts is used only for phonemization (its bundled espeak-ng bridge and the phoneme-id map); the voice model runs
in a session we own, so thread counts, streaming and cancellation are ours. Note: piper-tts and the espeak-ng data it
bundles are GPL-3.0-or-later.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from edgevoice.engines.onnx_session import PROVIDERS, open_session
from edgevoice.errors import ModelFormatError, ModelMissingError, SynthesizerError
from edgevoice.interfaces import FloatAudio

_ESPEAK_LOCK = threading.Lock()  # the espeak-ng bridge is a process-wide singleton

_PRONUNCIATION = {
    # thirteen to nineteen: stressed on "-teen" (seventeen already is)
    "θˈɜːtiːn": "θˌɜːtˈiːn",
    "fˈɔːɹtiːn": "fˌɔːɹtˈiːn",
    "fˈɪftiːn": "fˌɪftˈiːn",
    "sˈɪkstiːn": "sˌɪkstˈiːn",
    "ˈeɪtiːn": "ˌeɪtˈiːn",
    "nˈaɪntiːn": "nˌaɪntˈiːn",
    # euro, euros: one r
    "jˈʊɹɹoʊ": "jˈʊɹoʊ",
    "jˈʊɹɹoʊz": "jˈʊɹoʊz",
}
_WORD_SOUND = re.compile(r"(?<![^\s,.;:!?—-])(" + "|".join(_PRONUNCIATION) + r")(?![^\s,.;:!?—-])")


def fix_pronunciation(phonemes: str) -> str:
    """espeak-ng's English phonemes with a few words said as dictionaries give them, where the kiosk's voice was
    misheard for it:

    * thirteen to nineteen stressed on "-teen" (/ˌfɔːrˈtiːn/): espeak stresses their first syllable, as in
      "forty", and "fourteen euros" is heard as "40 euros";
    * "euro(s)" with one r (/ˈjʊroʊz/, espeak doubles it): "five euros" is heard as "five year olds".

    Only whole words change ("protein" and "Europe" keep espeak's sounds)."""
    return _WORD_SOUND.sub(lambda m: _PRONUNCIATION[m.group(1)], phonemes)


def espeak_phonemes(voice: str = "en-us") -> Callable[[str], str]:
    """Text to IPA phonemes with the espeak-ng bundled with piper-tts (what the kiosk compares misheard words by,
    :mod:`edgevoice.kiosk.sounds`); safe to call from any thread."""
    from piper.phonemize_espeak import EspeakPhonemizer

    with _ESPEAK_LOCK:
        phonemizer = EspeakPhonemizer()

    def phonemize(text: str) -> str:
        with _ESPEAK_LOCK:
            sentences = phonemizer.phonemize(voice, text)
        return " ".join("".join(s) for s in sentences)

    return phonemize


class PiperSynthesizer:
    """Text to speech with a Piper voice (``voice.onnx`` + ``voice.onnx.json``)."""

    def __init__(
        self,
        model_path: Path,
        config_path: Path | None = None,
        *,
        threads: int = 1,
        length_scale: float | None = None,
        noise_scale: float | None = None,
        noise_w: float | None = None,
        sentence_silence_ms: int = 0,
        provider: str = "cpu",
    ) -> None:
        """``provider``: "cpu" or "cuda" (ONNX Runtime's CUDA provider, falling back to the CPU where absent).
        ``length_scale``, ``noise_scale`` and ``noise_w`` default to the voice's own values; with both noise
        values at 0 the output is deterministic (the voice's sampling noise makes every rendering different)."""
        from piper.config import PiperConfig  # piper imports onnxruntime; keep it off the import path of edgevoice

        config_path = config_path or model_path.with_name(model_path.name + ".json")
        if not config_path.is_file():
            raise ModelMissingError(f"voice config {config_path} does not exist")
        try:
            self._config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        except (ValueError, KeyError) as exc:
            raise ModelFormatError(f"{config_path} is not a Piper voice config ({exc})") from exc
        self._session = open_session(model_path, threads=threads, providers=PROVIDERS[provider], varying_shapes=True)
        self.sample_rate: int = self._config.sample_rate
        self._scales = np.array(
            [
                noise_scale if noise_scale is not None else self._config.noise_scale,
                length_scale if length_scale is not None else self._config.length_scale,
                noise_w if noise_w is not None else self._config.noise_w_scale,
            ],
            dtype=np.float32,
        )
        self._needs_sid = self._config.num_speakers > 1
        self._silence = np.zeros(int(self.sample_rate * sentence_silence_ms / 1000), dtype=np.float32)
        self._phonemizer = self._make_phonemizer()

    @staticmethod
    def _make_phonemizer() -> object:
        from piper.phonemize_espeak import EspeakPhonemizer

        with _ESPEAK_LOCK:
            return EspeakPhonemizer()

    @property
    def settings(self) -> str:
        """Everything besides the voice's files that decides the audio of a text (for caching it): the sampling and
        speed scales, the pause between sentences, the espeak voice and the pronunciation fixes."""
        scales = ",".join(f"{v:.6g}" for v in self._scales.tolist())
        fixes = ";".join(f"{k}>{v}" for k, v in sorted(_PRONUNCIATION.items()))
        voice = f"rate={self.sample_rate} espeak={self._config.espeak_voice}"
        return f"scales={scales} silence={len(self._silence)} {voice} fixes={fixes}"

    def phonemize(self, text: str) -> list[list[str]]:
        """Phonemes grouped by sentence (English: with :func:`fix_pronunciation`)."""
        with _ESPEAK_LOCK:
            sentences: list[list[str]] = self._phonemizer.phonemize(self._config.espeak_voice, text)  # type: ignore[attr-defined]
        if not self._config.espeak_voice.startswith("en"):
            return sentences
        return [list(fix_pronunciation("".join(s))) for s in sentences]

    def synthesize(self, text: str) -> Iterator[FloatAudio]:
        """Yield float32 audio one sentence at a time, each as soon as it is computed."""
        from piper.phoneme_ids import phonemes_to_ids

        try:
            sentences = [s for s in self.phonemize(text) if s]
        except Exception as exc:
            raise SynthesizerError(f"phonemization failed: {exc}") from exc
        for index, phonemes in enumerate(sentences):
            ids = phonemes_to_ids(phonemes, self._config.phoneme_id_map)
            audio = self._run(ids)
            if index < len(sentences) - 1 and len(self._silence):
                audio = np.concatenate([audio, self._silence])
            yield audio

    def _run(self, ids: list[int]) -> FloatAudio:
        inputs: dict[str, np.ndarray] = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": self._scales,
        }
        if self._needs_sid:
            inputs["sid"] = np.array([0], dtype=np.int64)  # the voice's first speaker
        try:
            out = self._session.run(None, inputs)[0]
        except Exception as exc:
            raise SynthesizerError(f"voice model failed: {exc}") from exc
        audio = np.asarray(out, dtype=np.float32).reshape(-1)
        return np.clip(audio, -1.0, 1.0)

    def close(self) -> None:
        self._session = None
