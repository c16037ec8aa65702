"""The kiosk's voice (edgevoice/engines/piper_onnx.py): pronunciation fixes on espeak-ng's phonemes."""

from __future__ import annotations

import pytest

from edgevoice.engines.piper_onnx import stress_teens


@pytest.mark.parametrize(
    ("espeak", "said"),
    [
        ("ɐdˈʌlts fˈɔːɹtiːn jˈʊɹɹoʊz", "ɐdˈʌlts fˌɔːɹtˈiːn jˈʊɹɹoʊz"),
        ("θˈɜːtiːn, fˈɪftiːn, sˈɪkstiːn.", "θˌɜːtˈiːn, fˌɪftˈiːn, sˌɪkstˈiːn."),
        ("ˈeɪtiːn nˈaɪntiːn", "ˌeɪtˈiːn nˌaɪntˈiːn"),
        ("sˈɛvəntˌiːn", "sˈɛvəntˌiːn"),  # espeak already stresses "-teen"
        ("pɹˈoʊtiːn", "pɹˈoʊtiːn"),  # "protein" is not a number
        ("fˈɔːɹɾi", "fˈɔːɹɾi"),  # "forty" keeps its stress
        ("ʌnfˈɔːɹtiːn", "ʌnfˈɔːɹtiːn"),  # only whole words
    ],
)
def test_teen_numbers_are_stressed_on_teen(espeak: str, said: str) -> None:
    assert stress_teens(espeak) == said


@pytest.mark.models
def test_the_voice_says_fourteen_so_that_it_is_heard(store, engines) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.audio import to_model_rate
    from edgevoice.config import Config
    from edgevoice.engines.factory import piper_files
    from edgevoice.engines.piper_onnx import PiperSynthesizer

    tts = PiperSynthesizer(*piper_files(store, Config().models.tts), noise_scale=0.0, noise_w=0.0)
    try:
        assert "fˌɔːɹtˈiːn" in "".join(tts.phonemize("Adults fourteen euros")[0])
        audio = to_model_rate(next(iter(tts.synthesize("Adults fourteen euros"))), tts.sample_rate, 16000)
    finally:
        tts.close()
    heard = engines.recognizer.transcribe(audio).text.lower()
    assert "fourteen" in heard or "14" in heard, heard
