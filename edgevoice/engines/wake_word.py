"""microWakeWord through ``pymicro-wakeword``: the one adapter for a wake word (``[activation] mode = "wake_word"``).

The package ships its TensorFlow Lite runtime and four English wake-word models in the wheel (``okay_nabu``,
``hey_jarvis``, ``hey_mycroft``, ``alexa``, each about 50-80 kB; Home Assistant's voice satellites use them), so it
installs offline from the package index (``pip install 'edgevoice[wake_word]'``); a model of one's own is given by
the path of its microWakeWord JSON file. It listens to 10 ms steps of 16-bit audio at 16 kHz.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgevoice.errors import EdgeVoiceError, ModelMissingError
from edgevoice.interfaces import FloatAudio

STEP = 160
"""Samples per feature step (10 ms)."""


def import_micro_wake_word() -> Any:
    try:
        import pymicro_wakeword
    except ImportError as exc:
        raise ModelMissingError(
            "activation.wake_word: the pymicro-wakeword package is not installed (pip install 'edgevoice[wake_word]')"
        ) from exc
    return pymicro_wakeword


def builtin_wake_words() -> list[str]:
    """The wake words whose models come with the package."""
    return [m.value for m in import_micro_wake_word().Model]


class MicroWakeWord:
    """A streaming wake-word detector: :meth:`heard` takes microphone audio of any length, in order."""

    def __init__(self, wake_word: str) -> None:
        """``wake_word``: a built-in model's name (:func:`builtin_wake_words`) or a microWakeWord JSON file."""
        mww = import_micro_wake_word()
        try:
            if wake_word in builtin_wake_words():
                self._model = mww.MicroWakeWord.from_builtin(mww.Model(wake_word))
            elif wake_word.endswith(".json") and Path(wake_word).expanduser().is_file():
                self._model = mww.MicroWakeWord.from_config(Path(wake_word).expanduser())
            else:
                raise ModelMissingError(
                    f"activation.wake_word = {wake_word!r}: neither a built-in wake word "
                    f"({', '.join(builtin_wake_words())}) nor a microWakeWord .json file"
                )
        except (OSError, ValueError, KeyError) as exc:
            raise EdgeVoiceError(
                f"activation.wake_word = {wake_word!r}: cannot load it ({exc})", code="wake_word_model"
            ) from exc
        self._mww = mww
        self.phrase: str = self._model.wake_word
        self._features = mww.MicroWakeWordFeatures()
        self._rest = np.zeros(0, np.int16)

    def heard(self, audio: FloatAudio) -> bool:
        """Whether the wake word ended in ``audio`` (16 kHz float samples); the detector starts over after it."""
        pcm = np.concatenate([self._rest, (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)])
        whole = len(pcm) - len(pcm) % STEP
        self._rest = pcm[whole:]
        for start in range(0, whole, STEP):
            for features in self._features.process_streaming(pcm[start : start + STEP].tobytes()):
                if self._model.process_streaming(features):
                    self.reset()
                    return True
        return False

    def reset(self) -> None:
        """Forget the audio heard so far (after a detection, or when listening starts again)."""
        self._model.reset()
        self._features = self._mww.MicroWakeWordFeatures()
        self._rest = np.zeros(0, np.int16)

    def close(self) -> None:
        self._model.close()


def check_wake_word(wake_word: str) -> None:
    """Raise what loading ``wake_word`` would (:class:`MicroWakeWord`), for ``edgevoice config --check``."""
    MicroWakeWord(wake_word).close()
