import numpy as np
import pytest

from edgevoice.app import build_assistant
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.converse import Assistant
from edgevoice.interfaces import Engines
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth, FakeVad


def utterance() -> np.ndarray:
    audio = np.zeros(16000 * 3, dtype=np.float32)
    audio[16000:32000] = 0.3 * np.sin(np.arange(16000) / 5.0)
    return audio


def make(
    reply: str, transcript: str = "How much is a ticket?"
) -> tuple[Assistant, ManualClock, FakeLlm, FakeSynth, FakeRecognizer]:
    clock = ManualClock()
    asr, llm, tts = FakeRecognizer(transcript, clock), FakeLlm(reply, clock), FakeSynth(clock)
    engines = Engines(vad=FakeVad(), recognizer=asr, llm=llm, synthesizer=tts)
    return build_assistant(Config(), engines, clock=clock), clock, llm, tts, asr


def test_chain_transcribes_answers_and_times_every_stage() -> None:
    assistant, _, _llm, tts, asr = make("A student ticket costs 9 euros. Enjoy your visit.")
    result = assistant.converse(utterance())
    assert result.transcript == "How much is a ticket?"
    assert result.reply == "A student ticket costs 9 euros. Enjoy your visit."
    # only the speech (plus padding) was transcribed, not the silence around it
    assert 16000 <= asr.heard[0] <= 16000 + 2 * 2400 + 1024
    # numbers were spelled out for the synthesizer, one sentence at a time
    # the first piece goes out as soon as it is complete (at most six words), for an early first audio
    assert tts.texts == ["A student ticket costs nine euros.", "Enjoy your visit."]
    stages = result.stage_ms()
    assert stages["asr"] == pytest.approx(200.0)
    assert stages["llm_first_token"] == pytest.approx(50.0)
    # first audio: six tokens (the fake's tokens carry their trailing space), then one synthesis
    assert stages["first_audio"] == pytest.approx(6 * 50.0 + 30.0)
    assert stages["total"] >= stages["asr"] + stages["tts"]
    assert len(result.audio) == sum(len(t) * 100 for t in tts.texts)


def test_reply_is_cut_at_max_sentences_and_generation_stops() -> None:
    assistant, _, llm, _tts, _ = make("One. Two. Three. Four. Five. Six. Seven.")
    result = assistant.converse(utterance())
    assert result.reply == "One. Two."
    assert llm.tokens_given < 7
    assert assistant.history[-1].content == "One. Two."


def test_code_is_never_spoken() -> None:
    assistant, _, _, tts, _ = make("Sure, here it is: ```python print('hi') ``` done")
    result = assistant.converse(utterance())
    assert "print" not in result.reply and "```" not in " ".join(tts.texts)


def test_history_grows_and_prefix_stays_first() -> None:
    assistant, _, llm, _, _ = make("Yes.")
    assistant.converse(utterance())
    assistant.converse(utterance())
    first, second = llm.prompts
    assert second[: len(assistant.prefix)] == first[: len(assistant.prefix)] == assistant.prefix
    assert [m.role for m in second[len(assistant.prefix) :]] == ["user", "assistant", "user"]


def test_silence_is_no_speech_and_nothing_runs() -> None:
    assistant, _, llm, tts, asr = make("Should not be said.")
    result = assistant.converse(np.zeros(16000 * 2, dtype=np.float32))
    assert result.no_speech and result.transcript == "" and result.reply == ""
    assert asr.heard == [] and llm.prompts == [] and tts.texts == []
    assert len(result.audio) == 0


def test_empty_transcript_is_no_speech() -> None:
    assistant, _, llm, _, _ = make("Should not be said.", transcript="")
    result = assistant.converse(utterance())
    assert result.no_speech and llm.prompts == []
