"""The kiosk's voice (edgevoice/engines/piper_onnx.py): words espeak-ng says so that they are misheard, said as
dictionaries give them."""

from __future__ import annotations

import pytest

from edgevoice.engines.piper_onnx import fix_pronunciation


@pytest.mark.parametrize(
    ("espeak", "said"),
    [
        ("ɐdˈʌlts fˈɔːɹtiːn jˈʊɹɹoʊz", "ɐdˈʌlts fˌɔːɹtˈiːn jˈʊɹoʊz"),
        ("θˈɜːtiːn, fˈɪftiːn, sˈɪkstiːn.", "θˌɜːtˈiːn, fˌɪftˈiːn, sˌɪkstˈiːn."),
        ("ˈeɪtiːn nˈaɪntiːn", "ˌeɪtˈiːn nˌaɪntˈiːn"),
        ("sˈɛvəntˌiːn", "sˈɛvəntˌiːn"),  # espeak already stresses "-teen"
        ("pɹˈoʊtiːn", "pɹˈoʊtiːn"),  # "protein" is not a number
        ("fˈɔːɹɾi", "fˈɔːɹɾi"),  # "forty" keeps its stress
        ("ʌnfˈɔːɹtiːn", "ʌnfˈɔːɹtiːn"),  # only whole words
        ("fˈaɪv jˈʊɹɹoʊz, wˈʌn jˈʊɹɹoʊ.", "fˈaɪv jˈʊɹoʊz, wˈʌn jˈʊɹoʊ."),  # euro: one r
        ("jˈʊɹɹəp", "jˈʊɹɹəp"),  # Europe: not measured, left as espeak says it
    ],
)
def test_misheard_words_are_said_as_dictionaries_give_them(espeak: str, said: str) -> None:
    assert fix_pronunciation(espeak) == said


@pytest.mark.models
def test_the_voice_says_fourteen_so_that_it_is_heard(store, engines) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.audio.files import to_model_rate
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
