"""The live loop's logic with fake engines and in-memory rings: turns, replies, barge-in, history, shutdown."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.capture import CaptureFrontEnd
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.listen.endpointing import EndpointingConfig, TurnEndReason
from edgevoice.listen.turn import Turn
from edgevoice.live.events import Fallback, FallbackReason, LoopEvent, Partial, ReplyFinished
from edgevoice.live.loop import LoopOptions, VoiceLoop
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth


class EnergyVad:
    sample_rate = RATE
    frame_samples = 512

    def reset(self) -> None:
        pass

    def probability(self, frame: np.ndarray) -> float:
        return 0.9 if np.abs(frame).max() > 0.05 else 0.02


class CountingVad(EnergyVad):
    """Sets ``heard`` once it has judged ``frames`` frames."""

    def __init__(self, frames: int) -> None:
        self.frames, self.heard = frames, threading.Event()

    def probability(self, frame: np.ndarray) -> float:
        self.frames -= 1
        if self.frames <= 0:
            self.heard.set()
        return super().probability(frame)


class CompleteTurn:
    sample_rate = RATE

    def __init__(self) -> None:
        self.calls = 0

    def probability_complete(self, audio: np.ndarray) -> float:
        self.calls += 1
        return 0.9


def speech(seconds: float) -> np.ndarray:
    return (0.3 * np.sin(np.arange(int(seconds * RATE)) / 3.0)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


class SlowSynth(FakeSynth):
    """Many chunks per clause, so a reply takes long enough to be interrupted."""

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        for _ in range(20):
            yield np.full(2205, 0.1, dtype=np.float32)


@pytest.fixture
def rings() -> Iterator[tuple[SharedRing, SharedRing]]:
    with SharedRing.create(RATE * 30) as mic, SharedRing.create(22050 * 30) as spk:
        yield mic, spk


def make_loop(  # type: ignore[no-untyped-def]
    mic: SharedRing,
    spk: SharedRing,
    reply: str,
    synth: FakeSynth | None = None,
    *,
    barge_in_level_db=None,
    endpoint: EndpointingConfig | None = None,
    text_turn=None,
    turns: list[Turn] | None = None,
    answered: list[tuple[ReplyTrace, Turn]] | None = None,
    speculative_reply: bool = False,
    prefill_while_speaking: bool = False,
    llm: FakeLlm | None = None,
    recognizer: FakeRecognizer | None = None,
):
    clock = ManualClock()
    responder = Responder(
        recognizer or FakeRecognizer("Where is the cafe?", clock, seconds=0.0),
        llm or FakeLlm(reply, clock, per_token=0.0),
        synth or FakeSynth(clock),
        prefix_messages("You are a test.", "The cafe is upstairs."),
        max_tokens=60,
        max_sentences=Config().kiosk.max_sentences,
        clock=clock,
    )
    traces: list[ReplyTrace] = []
    done = threading.Event()

    def on_finished(event: LoopEvent) -> None:
        if not isinstance(event, ReplyFinished):
            return
        if turns is not None:
            turns.append(event.turn)
        if answered is not None:
            answered.append((event.trace, event.turn))
        traces.append(event.trace)
        done.set()

    loop = VoiceLoop(
        mic=mic,
        speaker=spk,
        vad=EnergyVad(),
        turn_model=CompleteTurn(),
        responder=responder,
        endpoint=endpoint or EndpointingConfig(),
        options=LoopOptions(
            barge_in_level_db=barge_in_level_db,
            speculative_reply=speculative_reply,
            prefill_while_speaking=prefill_while_speaking,
        ),
        text_turn=text_turn,
    )
    loop.bus.subscribe(on_finished, name="test-traces")
    return loop, responder, traces, done


class Player:
    """Stands in for the output device callback: takes 10 ms of the reply every 10 ms, in real time, keeps what it
    took (``played``) and wakes those waiting for an amount to be played."""

    def __init__(self, loop: VoiceLoop) -> None:
        self.loop = loop
        self.played: list[np.ndarray] = []
        self.stop = threading.Event()
        self._taken = 0
        self._changed = threading.Condition()

    def run(self) -> None:
        buf = np.zeros(220, dtype=np.float32)
        while not self.stop.is_set():
            n = self.loop.playback.read_into(buf)
            with self._changed:
                self.played.append(buf.copy())
                self._taken += n
                self._changed.notify_all()
            self.stop.wait(0.01)  # the device's period

    def wait_played(self, seconds: float, timeout: float = 10.0) -> bool:
        """Until ``seconds`` of reply audio (22.05 kHz) were taken from the ring."""
        with self._changed:
            return self._changed.wait_for(lambda: self._taken >= seconds * 22050, timeout)


@contextlib.contextmanager
def running(loop: VoiceLoop) -> Iterator[Player]:
    """The loop started, with a :class:`Player` standing in for the output device. Both are stopped and joined on
    exit."""
    player = Player(loop)
    thread = threading.Thread(target=player.run)
    try:
        with loop:
            thread.start()
            yield player
    finally:
        player.stop.set()
        if thread.is_alive():
            thread.join()


class AskedLlm(FakeLlm):
    """Tells when it is first asked for a reply."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply, ManualClock(), per_token=0.0)
        self.asked = threading.Event()

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        self.asked.set()
        yield from super().stream_reply(messages, max_tokens=max_tokens)


def test_a_turn_is_answered_and_remembered(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "The cafe is upstairs. It opens at ten.")
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.5), speech(1.0), silence(0.6)]))
        assert done.wait(10)
        assert spk.available() == 0  # the trace comes once the reply has left the ring
    (trace,) = traces
    assert trace.transcript == "Where is the cafe?"
    assert trace.reply == "The cafe is upstairs. It opens at ten."
    assert not trace.cancelled
    assert trace.memory_trim_s is not None  # nothing waited: the turn's freed memory went back (glibc)
    assert [m.content for m in responder.history] == ["Where is the cafe?", trace.reply]
    assert np.concatenate(player.played).max() == pytest.approx(0.1)
    assert spk.stats().overrun_events == 0


def test_barge_in_flushes_output_cancels_and_keeps_only_what_was_played(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    clock = ManualClock()
    loop, responder, traces, done = make_loop(
        mic, spk, "The cafe is upstairs next to the big window. It opens at ten every day.", SlowSynth(clock)
    )
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert player.wait_played(1.0)  # the reply is audible: speak over it (a second later, not going on)
        mic.write(np.concatenate([silence(1.0), speech(0.5)]))
        assert done.wait(10)
        queued_at_barge_in = spk.stats().written
    trace = traces[0]
    assert loop.barge_ins == 1
    assert trace.cancelled
    # output stopped: what was queued was flushed, and far less than the first clause (2 s) was played
    assert loop.playback.flushed_samples > 0
    assert loop.playback.played < 44100
    assert queued_at_barge_in > loop.playback.played
    # the history keeps only what the visitor heard: part of the first clause, nothing of the second sentence
    assistant = responder.history[1].content
    assert assistant.endswith("...") and "opens" not in assistant
    assert 0 < len(assistant) < len(trace.clauses[0].text) + 3


def voiced(seconds: float, level: float) -> np.ndarray:
    """Speech to the fake VAD at ``level``, which :class:`PartsRecognizer` tells apart."""
    return (level * np.sign(np.sin(np.arange(1, int(seconds * RATE) + 1) / 3.0))).astype(np.float32)


class PartsRecognizer(FakeRecognizer):
    """Hears the first part of a question in audio at level 0.3 and its rest at 0.2."""

    PARTS = ((0.3, "Where is the cafe"), (0.2, "on the first floor?"))

    def __init__(self) -> None:
        super().__init__("", ManualClock(), seconds=0.0)

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        self.heard.append(len(audio))
        levels = np.round(np.abs(audio), 3)
        return Transcript(" ".join(text for level, text in self.PARTS if np.any(levels == level)))


@pytest.mark.parametrize(
    ("rejoin_ms", "heard_s", "rejoined"),
    [(1000, 0.0, True), (0, 0.0, False), (1000, 0.6, False)],
    ids=["goes on", "rejoin off", "after hearing the reply"],
)
def test_speech_right_after_a_commit_goes_on_with_that_turn_and_the_whole_is_answered(
    rings: tuple[SharedRing, SharedRing], rejoin_ms: int, heard_s: float, rejoined: bool
) -> None:
    mic, spk = rings
    turns: list[Turn] = []
    llm = FakeLlm("The cafe is on the first floor next to the shop.", ManualClock(), per_token=0.0)
    loop, responder, traces, _ = make_loop(
        mic, spk, "", SlowSynth(ManualClock()), endpoint=EndpointingConfig(rejoin_ms=rejoin_ms), turns=turns,
        llm=llm, recognizer=PartsRecognizer(),
    )  # fmt: skip
    with running(loop) as player:
        # half a question and a pause long enough to end the turn; its reply begins, and the visitor goes on over it
        # (a barge-in) after hearing ``heard_s`` of it, 0.3 + heard_s seconds after the half
        mic.write(np.concatenate([silence(0.3), voiced(1.0, 0.3), silence(0.3)]))
        assert player.wait_played(0.1)
        mic.write(np.concatenate([silence(heard_s), voiced(1.0, 0.2), silence(1.0)]))
        deadline = time.monotonic() + 10
        while len(traces) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    first, second = traces
    assert first.transcript == "Where is the cafe" and first.cancelled  # its reply cut at once
    assert loop.barge_ins == 1
    if rejoined:
        # the second turn holds both parts and the whole is answered; the half left the conversation
        assert turns[1].continues == turns[0].turn_id
        assert second.transcript == "Where is the cafe on the first floor?"
        assert len(turns[1].audio) / RATE > 2.0
        assert llm.prompts[-1][-1].content == second.transcript
        assert [m.content for m in responder.history] == [second.transcript, second.reply]
        # only the new part was decoded again: the first part's words were carried
        assert max(responder.recognizer.heard[-2:]) / RATE < 2.0  # type: ignore[attr-defined]
    else:  # a question of its own: the rest alone, after the cut exchange
        assert turns[1].continues is None
        assert second.transcript == "on the first floor?"
        assert [m.content for m in responder.history][::2] == ["Where is the cafe", "on the first floor?"]


class WordsJudge:
    """A text end-of-turn judge that gives ``p`` and keeps what it was asked about."""

    def __init__(self, p: float) -> None:
        self.p, self.texts, self.threads = p, [], []  # type: ignore[var-annotated]

    def probability_complete(self, text: str) -> float:
        self.texts.append(text)
        self.threads.append(threading.current_thread().name)
        return self.p


def test_the_words_are_not_judged_when_the_check_is_off(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    judge = WordsJudge(0.0)
    off = EndpointingConfig(text_incomplete_below=0.0)
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", text_turn=judge, endpoint=off)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(2.0)]))
        assert done.wait(10)
    assert judge.texts == [] and traces[0].reply == "Upstairs."


@pytest.mark.parametrize(("p", "reason"), [(0.001, "silence_timeout"), (0.3, "complete")])
def test_a_pause_that_sounds_complete_waits_when_its_words_do_not_end_a_sentence(
    rings: tuple[SharedRing, SharedRing], p: float, reason: str
) -> None:
    mic, spk = rings
    judge, turns = WordsJudge(p), []  # type: ignore[var-annotated]
    endpoint = EndpointingConfig(text_incomplete_below=0.005)
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", text_turn=judge, turns=turns, endpoint=endpoint)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(2.0)]))
        assert done.wait(10)
    # the speculative transcript, at the visitor's silence; before it, a partial transcript read ahead, if one was
    # decoded before the silence
    assert judge.texts[-1] == "Where is the cafe?" and len(judge.texts) <= 1 + loop.asr.partials
    (turn,) = turns
    assert turn.reason == reason
    silence_s = turn.committed_t - turn.speech_end_t
    if reason == "complete":
        assert silence_s < 0.5
    else:  # held for the incomplete wait, then ended by the silence
        assert silence_s >= EndpointingConfig().incomplete_max_silence_ms / 1000 - 0.05
    assert traces[0].reply == "Upstairs."


@pytest.mark.parametrize(("p", "started"), [(0.001, 0), (0.3, 1)])
def test_the_words_are_judged_beside_smart_turn_and_a_reply_begins_only_after_a_whole_sentence(
    rings: tuple[SharedRing, SharedRing], p: float, started: int
) -> None:
    mic, spk = rings
    judge = WordsJudge(p)
    endpoint = EndpointingConfig(text_incomplete_below=0.005)
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", text_turn=judge, endpoint=endpoint, speculative_reply=True)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(2.0)]))
        assert done.wait(10)
    # the recognition worker asks, right after its decode, while the listener asks Smart Turn about the sound
    assert set(judge.threads) == {"edgevoice-asr"}
    # half a sentence gets no reply begun for it; a whole one gets it, and it is the one heard
    assert loop.speculation.counts["started"] == started
    assert loop.speculation.counts["adopted"] == started
    assert traces[0].reply == "Upstairs."


def test_a_turn_with_nothing_recognized_ends_without_waiting_for_a_verdict_on_no_words(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    judge, turns = WordsJudge(0.3), []  # type: ignore[var-annotated]
    endpoint = EndpointingConfig(text_incomplete_below=0.005)
    loop, responder, traces, done = make_loop(
        mic, spk, "Upstairs.", text_turn=judge, turns=turns, endpoint=endpoint, speculative_reply=True
    )
    responder.recognizer.text = ""  # type: ignore[attr-defined]  # a cough, a door: speech to the VAD, no words
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(1.0)]))
        assert done.wait(10)
    # the listener is told that the speculative decode heard nothing and that there are no words to judge (it used to
    # wait 0.4 s for a decode and 1.5 s for a verdict that never came); nothing is judged, begun, prefilled or said
    assert loop.speculation.decoded.is_set() and loop.speculation.judged.is_set()
    assert loop.speculation.words_complete is None
    assert [t.reason for t in turns] == ["complete"] and traces[0].reply == ""
    assert "" not in judge.texts and loop.speculative_replies["started"] == 0


@pytest.mark.parametrize("goes_on", [False, True])
def test_an_unsure_pause_keeps_the_reply_begun_for_it_until_its_shorter_silence_ends_the_turn(
    rings: tuple[SharedRing, SharedRing], goes_on: bool
) -> None:
    mic, spk = rings
    # words between text_incomplete_below and text_complete_at, a sound that is not sure: unsure
    judge, turns = WordsJudge(0.03), []  # type: ignore[var-annotated]
    endpoint = EndpointingConfig(text_incomplete_below=0.005)
    loop, _, traces, done = make_loop(
        mic, spk, "Upstairs.", text_turn=judge, turns=turns, endpoint=endpoint, speculative_reply=True
    )
    with running(loop):
        if goes_on:  # the visitor goes on 0.5 s into the pause: no reply to the first half
            mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.5), speech(1.0), silence(2.0)]))
        else:
            mic.write(np.concatenate([silence(0.3), speech(1.0), silence(2.0)]))
        assert done.wait(10)
        time.sleep(0.3)  # nothing more comes
    (turn,) = turns
    assert turn.reason == "silence_timeout"
    silence_s = turn.committed_t - turn.speech_end_t
    assert endpoint.unsure_silence_ms / 1000 - 0.05 <= silence_s < endpoint.incomplete_max_silence_ms / 1000 - 0.2
    assert len(turn.audio) / RATE > (2.4 if goes_on else 1.2)  # the turn holds what was said after the pause too
    counts = loop.speculative_replies
    if goes_on:  # the reply begun at the first pause was dropped (the one for the second may have begun too)
        assert counts["dropped"] >= 1 and counts["started"] == counts["adopted"] + counts["dropped"]
    else:  # the reply begun at the pause stood through the wait and is the one heard
        assert counts == {"started": 1, "adopted": 1, "dropped": 0} and traces[0].speculative_reply
    assert traces[0].reply == "Upstairs."


def test_the_words_judge_reads_the_partial_transcripts_ahead_and_none_once_the_visitor_is_silent(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    judge = WordsJudge(0.3)
    endpoint = EndpointingConfig(text_incomplete_below=0.005)
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", text_turn=judge, endpoint=endpoint)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.5)]))  # a partial transcript after a second of speech
        deadline = time.monotonic() + 5
        while not judge.texts and time.monotonic() < deadline:
            time.sleep(0.01)
        # read by the judge on the recognition worker as it comes, while the visitor still speaks
        assert judge.texts == ["Where is the cafe?"] and loop.asr.partials == 1
        mic.write(np.concatenate([speech(0.5), silence(2.0)]))
        assert done.wait(10)
    # the speculative transcript last, at the silence (a partial decoded as the visitor fell silent is not read)
    assert judge.texts[-1] == "Where is the cafe?" and 2 <= len(judge.texts) <= loop.asr.partials + 1
    assert set(judge.threads) == {"edgevoice-asr"}
    assert traces[0].reply == "Upstairs."
    # after the silence nothing is read ahead: a partial then would hold up the speculative decode
    read = len(judge.texts)
    loop.speculation.open_turn(99)
    loop.speculation.silence(lambda: 1)
    loop.speculation.on_partial("Where is")
    assert len(judge.texts) == read


class RecordingPrefillLlm(FakeLlm):
    """Keeps the visitor's words of every prompt it prefills, and the thread that asked."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply, ManualClock(), per_token=0.0)
        self.prefilled: list[tuple[str, str]] = []

    def prefill(self, messages):  # type: ignore[no-untyped-def]
        self.prefilled.append((messages[-1].content, threading.current_thread().name))
        return 1


@pytest.mark.parametrize("on", [True, False])
def test_a_partial_transcript_is_prefilled_while_the_visitor_speaks(
    rings: tuple[SharedRing, SharedRing], on: bool
) -> None:
    mic, spk = rings
    llm = RecordingPrefillLlm("Upstairs.")
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", llm=llm, prefill_while_speaking=on)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.5)]))  # a partial transcript after a second of speech
        deadline = time.monotonic() + 5
        while (not llm.prefilled if on else loop.asr.partials == 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not on:
            time.sleep(0.2)  # time enough for a prefill that should not come
        # on its own thread, before the visitor has stopped speaking
        assert llm.prefilled == ([("Where is the cafe?", "edgevoice-prefill")] if on else [])
        mic.write(np.concatenate([speech(0.5), silence(2.0)]))
        assert done.wait(10)
    assert traces[0].reply == "Upstairs."
    # none once the visitor is silent: after the speculative transcript's prefill (the recognition worker's), only
    # the responder's (the conversation after the reply)
    threads = [thread for _, thread in llm.prefilled]
    assert "edgevoice-asr" in threads
    assert set(threads[threads.index("edgevoice-asr") :]) <= {"edgevoice-asr", "edgevoice-responder"}


def test_silence_gives_no_turn_and_close_is_prompt(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, traces, _ = make_loop(mic, spk, "Never.")
    vad = loop.listener.vad = CountingVad(int(1.9 * RATE / 512))
    loop.start()
    mic.write(silence(2.0))
    assert vad.heard.wait(5)
    t = time.monotonic()
    loop.close()
    assert time.monotonic() - t < 2.0
    assert traces == [] and loop.listener.turn_model.calls == 0  # type: ignore[attr-defined]


def test_a_turn_cut_at_max_turn_s_is_answered_once_the_visitor_pauses(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    turns: list[Turn] = []
    loop, _, traces, done = make_loop(mic, spk, "Yes.", endpoint=EndpointingConfig(max_turn_s=2.0), turns=turns)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(2.6), silence(0.6)]))
        assert done.wait(10)
    (turn,) = turns
    assert len(traces) == 1 and turn.reason is TurnEndReason.MAX_LENGTH
    # speech from frame 9 (0.288 s), confirmed in frame 12, is cut 2 s after its onset, in frame 71: the turn keeps
    # the preroll (the 10 frames up to the confirmation) and what came until the cut, not the speech that went on
    assert (turn.audio.start, len(turn.audio)) == (3 * 512, (72 - 3) * 512)
    # speech ends in frame 90; six silent frames (192 ms) later, at the end of frame 96, the turn is answered
    assert turn.committed_t == pytest.approx(97 * 512 / RATE)


class VadBrokenAt(EnergyVad):
    """Raises an unexpected error on its ``n``-th frame."""

    def __init__(self, n: int) -> None:
        self.n = n

    def probability(self, frame: np.ndarray) -> float:
        self.n -= 1
        if self.n == 0:
            raise RuntimeError("vad exploded")
        return super().probability(frame)


def test_a_listener_error_while_a_cut_turn_waits_still_answers_it(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, traces, done = make_loop(mic, spk, "Yes.", endpoint=EndpointingConfig(max_turn_s=2.0))
    loop.listener.vad = VadBrokenAt(80)  # the turn is cut in frame 71; the visitor goes on until frame 90
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(2.6), silence(0.6)]))
        assert done.wait(10)
    assert [e.code for e in loop.errors] == ["stage_unexpected"]
    assert len(traces) == 1 and traces[0].reply == "Yes."


class FlakyLlm(FakeLlm):
    """Raises an unexpected error on its first reply, then works."""

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        if not self.prompts:
            self.prompts.append(list(messages))
            raise RuntimeError("engine crashed")
        yield from super().stream_reply(messages, max_tokens=max_tokens)


FALLBACK = np.full(2205, -0.2, dtype=np.float32)
"""Stands in for the synthesized fallback phrase: a level no fake reply has."""


def test_a_crashing_stage_gets_the_fallback_phrase_and_the_next_turn_works(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "It is upstairs.")
    loop.output.fallback_audio, loop.output.fallback_text = FALLBACK, "Sorry?"
    responder.llm = FlakyLlm("It is upstairs.", ManualClock(), per_token=0.0)
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.3), speech(0.8), silence(1.5)]))  # a question of its own next
        assert done.wait(10)
        done.clear()
        mic.write(np.concatenate([speech(0.8), silence(0.6)]))
        assert done.wait(10)
    (error,) = loop.errors
    assert error.code == "stage_unexpected" and "engine crashed" in str(error)
    assert [t.reply for t in traces] == ["Sorry?", "It is upstairs."]
    assert [t.fallback for t in traces] == ["error", None] and traces[0].error == "stage_unexpected"
    assert not traces[0].cancelled  # a failure, not a barge-in
    audio = np.concatenate(player.played)
    assert np.sum(np.isclose(audio, -0.2)) == len(FALLBACK)  # the whole phrase played, once
    assert np.flatnonzero(np.isclose(audio, -0.2))[-1] < np.flatnonzero(np.isclose(audio, 0.1))[0]  # before turn 2
    # the failed turn left no trace in the conversation
    assert [m.content for m in responder.history] == ["Where is the cafe?", "It is upstairs."]


class HangingLlm(FakeLlm):
    """Its first reply blocks (a hung engine) until released, then works."""

    def __init__(self, reply: str, clock: ManualClock) -> None:
        super().__init__(reply, clock, per_token=0.0)
        self.release = threading.Event()
        self.hanging = threading.Event()

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        if not self.prompts:
            self.hanging.set()
            self.release.wait(10)
        yield from super().stream_reply(messages, max_tokens=max_tokens)


def test_a_hung_stage_gets_the_fallback_within_the_budget_and_the_late_reply_is_dropped(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "It is upstairs.")
    loop.output.fallback_audio, loop.output.fallback_text, loop.output.budget_s = FALLBACK, "Sorry?", 0.3
    llm = HangingLlm("It is upstairs.", ManualClock())
    responder.llm = llm
    fallbacks: list[Fallback] = []
    fell_back = threading.Event()

    def on_event(event: LoopEvent) -> None:
        if isinstance(event, Fallback):
            fallbacks.append(event)
            fell_back.set()

    loop.bus.subscribe(on_event, name="test-events")
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.3), speech(0.8), silence(1.5)]))  # the listener runs on: 1.5 s
        assert llm.hanging.wait(10)
        assert fell_back.wait(10)
        assert fallbacks == [Fallback(1, FallbackReason.LATE)]
        assert not done.is_set()  # the engine still hangs, the phrase plays all the same
        llm.release.set()
        assert done.wait(10)
        done.clear()
        mic.write(np.concatenate([speech(0.8), silence(0.6)]))
        assert done.wait(10)
    first, second = traces
    assert first.fallback == "late" and first.reply == "Sorry?" and first.first_sample_queued is not None
    assert first.first_sample_queued - first.committed < 0.3 + 0.2  # budget, plus one 32 ms frame and scheduling
    assert second.fallback is None and second.reply == "It is upstairs."
    audio = np.concatenate(player.played)
    assert np.sum(np.isclose(audio, -0.2)) == len(FALLBACK)
    # only the second turn's reply: nothing the hung engine produced once released
    assert np.sum(np.isclose(audio, 0.1)) == sum(c.end_sample - c.start_sample for c in second.clauses) > 0


class CountingRecognizer:
    """Names each piece of audio it hears by its length, so joins and tails can be checked."""

    sample_rate = RATE

    def __init__(self) -> None:
        self.heard: list[tuple[str, int]] = []
        """(thread, samples) of every final decode: stable segments on the ASR worker, the tail on the responder."""
        self.partials = 0

    def transcribe_partial(self, audio: np.ndarray, *, prompt: str = ""):  # type: ignore[no-untyped-def]
        self.partials += 1
        return self._name(audio)

    def transcribe(self, audio: np.ndarray, *, prompt: str = ""):  # type: ignore[no-untyped-def]
        self.heard.append((threading.current_thread().name, len(audio)))
        return self._name(audio)

    def _name(self, audio: np.ndarray):  # type: ignore[no-untyped-def]
        from edgevoice.events import Transcript

        n = len(audio) // 160
        frames = np.abs(audio[: n * 160]).reshape(n, 160).max(axis=1)
        loud = round(np.sum(frames > 0.05) * 160 / RATE * 10)  # tenths of a second of speech
        return Transcript(f"part{loud}" if loud else "")


class IncompleteThenComplete:
    sample_rate = RATE

    def __init__(self) -> None:
        self.calls = 0

    def probability_complete(self, audio: np.ndarray) -> float:
        self.calls += 1
        return 0.1 if self.calls == 1 else 0.9


def test_recognition_runs_while_the_visitor_speaks_and_only_the_tail_is_left(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "Yes.")
    recognizer = CountingRecognizer()
    responder.recognizer = recognizer
    loop.asr.recognizer = recognizer
    loop.listener.turn_model = IncompleteThenComplete()
    partials: list[str] = []
    partial = threading.Event()

    def on_event(event: LoopEvent) -> None:
        if isinstance(event, Partial):
            partials.append(event.text)
            partial.set()

    loop.bus.subscribe(on_event, name="test-events")
    with running(loop):
        # 1.6 s of speech (a partial transcript comes while it goes on), a 0.4 s pause the end-of-turn model calls
        # incomplete, 0.5 s more, then silence
        mic.write(np.concatenate([silence(0.3), speech(1.6)]))
        assert partial.wait(10)
        mic.write(np.concatenate([silence(0.4), speech(0.5), silence(0.6)]))
        assert done.wait(10)
    (trace,) = traces
    # the stable first part was decoded at the pause, the rest at the end, and the two joined
    assert trace.transcript == "part16 part5", trace.transcript
    # the part before the pause was decoded once, speculatively, when the visitor paused, and adopted as stable
    assert loop.asr.segments_decoded == 0
    # the tail was decoded the moment the visitor fell silent (speculation), before the turn was committed, and
    # it held only the audio after the pause; the responder had nothing left to decode
    assert loop.asr.speculations_used == 1
    assert [thread for thread, _ in recognizer.heard] == ["edgevoice-asr", "edgevoice-asr"]
    tail = recognizer.heard[-1][1]
    assert tail < (0.5 + 0.7) * RATE
    assert partials and partials[0].startswith("part")  # a partial transcript came while the visitor spoke


class BrokenOnceVad(EnergyVad):
    def __init__(self) -> None:
        self.failed = False

    def probability(self, frame: np.ndarray) -> float:
        if not self.failed and np.abs(frame).max() > 0.05:
            self.failed = True
            raise RuntimeError("vad exploded")
        return super().probability(frame)


def test_an_unexpected_listener_error_does_not_leave_the_kiosk_deaf(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, traces, done = make_loop(mic, spk, "Yes.")
    loop.listener.vad = BrokenOnceVad()
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert done.wait(10)
    assert [e.code for e in loop.errors] == ["stage_unexpected"]
    assert traces[0].reply == "Yes."


class PassThroughEcho:
    """An echo path whose canceller passes the microphone through (the test supplies "cleaned" audio directly)."""

    delay = 0
    settling = False  # converged: the gate's level is the configured one

    def process(self, frame: np.ndarray, *, speaking: bool) -> np.ndarray:
        return frame


REPLY_UNDER_SOUND = "The cafe is upstairs next to the big window."


def reply_with_a_sound_over_it(
    rings: tuple[SharedRing, SharedRing], sound: np.ndarray
) -> tuple[VoiceLoop, Responder, list[ReplyTrace], bool]:
    """A question, then ``sound`` fed through the capture path (echo canceller passing it through, barge-in gate
    at -40 dBFS) once half a second of the reply has played, then silence until the reply ends. Returns the loop,
    its responder, the traces, and whether the speaker was paused right after the sound."""
    mic, spk = rings
    clock = ManualClock()
    loop, responder, traces, done = make_loop(mic, spk, REPLY_UNDER_SOUND, SlowSynth(clock), barge_in_level_db=-40.0)
    assert loop.gate is not None
    capture = CaptureFrontEnd(mic, PassThroughEcho(), loop.gate, loop.playback)  # type: ignore[arg-type]
    with running(loop) as player:
        capture(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert player.wait_played(0.5)
        capture(sound)
        paused = loop.playback.paused
        capture(silence(1.0))
        assert done.wait(20)
    return loop, responder, traces, paused


def test_a_loud_non_speech_sound_pauses_the_reply_which_then_resumes(rings: tuple[SharedRing, SharedRing]) -> None:
    # a hum at -30 dBFS: loud enough for the level gate, but no speech for the VAD
    loop, responder, traces, paused = reply_with_a_sound_over_it(rings, np.full(RATE // 2, 0.03, dtype=np.float32))
    assert paused  # at once, by the capture path: the listener had no say
    # the reply went on when the VAD heard no speech
    assert loop.gate is not None and loop.gate.pauses == 1
    assert loop.false_barge_ins == 1
    assert loop.barge_ins == 0 and not traces[0].cancelled
    assert responder.history[1].content == traces[0].reply == REPLY_UNDER_SOUND


def test_faint_speech_under_the_level_does_not_cut_the_reply(rings: tuple[SharedRing, SharedRing]) -> None:
    """What the VAD takes for speech but is fainter than the barge-in level (the residue of the kiosk's own voice
    after the echo canceller) neither pauses nor cancels the reply, nor goes on with the turn it answers (it starts
    within ``rejoin_ms`` of the commit)."""
    faint = np.zeros(RATE, dtype=np.float32)
    faint[::160] = 0.1  # one click per 10 ms: speech to the fake VAD (peak > 0.05), about -42 dBFS
    loop, responder, traces, paused = reply_with_a_sound_over_it(rings, faint)
    assert not paused and loop.gate is not None and loop.gate.pauses == 0 and loop.barge_ins == 0
    assert not traces[0].cancelled and responder.history[1].content == traces[0].reply == REPLY_UNDER_SOUND


class PrefillingLlm(FakeLlm):
    """A model whose prefill runs until it is interrupted (``stubborn``: never), like a long llama.cpp prefill."""

    def __init__(self, clock: ManualClock, *, stubborn: bool = False) -> None:
        super().__init__("Fine.", clock, per_token=0.0)
        self.stubborn = stubborn
        self.prefilling = threading.Event()
        self.interrupted = threading.Event()
        self.release = threading.Event()

    def prefill(self, messages: object) -> int:
        self.prefilling.set()
        self.release.wait(10)
        return 0

    def interrupt(self) -> None:
        self.interrupted.set()
        if not self.stubborn:
            self.release.set()


@pytest.mark.parametrize("stubborn", [False, True])
def test_close_interrupts_the_language_model_and_says_whether_every_thread_ended(
    rings: tuple[SharedRing, SharedRing], stubborn: bool
) -> None:
    """Shutdown while a thread is inside the language model: the model is interrupted and close() returns True
    once every thread ended; a thread that cannot be stopped makes it return False (the caller must then not free
    the engines: freeing llama.cpp under a running decode crashed `edgevoice run` on SIGTERM)."""
    mic, spk = rings
    loop, responder, _, _ = make_loop(mic, spk, "Fine.")
    llm = PrefillingLlm(ManualClock(), stubborn=stubborn)
    responder.llm = llm
    loop.start()
    try:
        # the visitor fell silent: the recognition worker decodes the tail and prefills the model with it
        loop.asr.start_turn(1)
        loop.asr.speculate(speech(0.5))
        assert llm.prefilling.wait(5)
        t = time.monotonic()
        ended = loop.close(timeout=0.5)
        assert time.monotonic() - t < 1.0
        assert llm.interrupted.is_set()
        assert ended is (not stubborn)
    finally:
        llm.release.set()
        loop.close(timeout=5)


def test_a_reply_begun_at_the_pause_is_adopted_when_the_turn_ends(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "The cafe is upstairs. It opens at ten.")
    llm = responder.llm = AskedLlm("The cafe is upstairs. It opens at ten.")
    loop.speculation.enabled = True
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.05)]))  # the visitor falls silent
        assert llm.asked.wait(10)  # the reply begins
        mic.write(silence(0.6))  # ... and the visitor stays silent: the turn ends
        assert done.wait(10)
    (trace,) = traces
    assert loop.speculative_replies == {"started": 1, "adopted": 1, "dropped": 0}
    assert trace.speculative_reply and trace.reply == "The cafe is upstairs. It opens at ten."
    assert len(responder.llm.prompts) == 1  # type: ignore[attr-defined]  # generated once, before the commit
    assert trace.first_token is not None and trace.first_token >= trace.committed  # settled at the commit
    assert [m.content for m in responder.history] == ["Where is the cafe?", trace.reply]
    audio = np.concatenate(player.played)
    assert np.sum(np.isclose(audio, 0.1)) == sum(c.end_sample - c.start_sample for c in trace.clauses) > 0


def test_a_reply_begun_at_a_pause_is_dropped_when_the_visitor_goes_on(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, responder, traces, done = make_loop(mic, spk, "The cafe is upstairs.")
    llm = responder.llm = AskedLlm("The cafe is upstairs.")
    loop.speculation.enabled = True
    with running(loop) as player:
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.1)]))  # a breath: shorter than silence_ms
        assert llm.asked.wait(10)  # the reply begins
        assert loop.speculative_replies["started"] == 1
        mic.write(np.concatenate([speech(0.8), silence(0.6)]))  # the visitor goes on, then stops
        assert done.wait(10)
    (trace,) = traces
    counts = loop.speculative_replies
    assert counts["dropped"] == 1 and counts["adopted"] == counts["started"] - 1  # the turn's end was answered
    assert trace.reply == "The cafe is upstairs." and not trace.cancelled
    audio = np.concatenate(player.played)
    # only the adopted reply was heard: nothing of the dropped one reached the speaker
    assert np.sum(np.isclose(audio, 0.1)) == sum(c.end_sample - c.start_sample for c in trace.clauses)
    assert [m.content for m in responder.history] == ["Where is the cafe?", trace.reply]


class ClauseSynth(FakeSynth):
    """Half a second of audio per clause, in five chunks: the playback takes a while to reach the next clause."""

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        for _ in range(5):
            yield np.full(2205, 0.1, dtype=np.float32)


def test_each_clause_is_announced_when_its_first_sample_is_played(rings: tuple[SharedRing, SharedRing]) -> None:
    """Real threads (the captions' poller, the player): published in order, and never before the sound."""
    from edgevoice.live.events import ClauseStarted, ReplyStarted, Shutdown, Transcribed

    mic, spk = rings
    loop, _responder, traces, done = make_loop(
        mic, spk, "The cafe is upstairs. It opens at ten.", ClauseSynth(ManualClock())
    )
    seen: list[tuple[LoopEvent, int]] = []  # each event with the samples played when it was published
    loop.bus.subscribe_inline(lambda event: seen.append((event, loop.playback.played)))
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert done.wait(10)
    (trace,) = traces
    kinds = [(type(e).__name__, getattr(e, "index", None)) for e, _ in seen if not isinstance(e, (Partial, Shutdown))]
    assert kinds[kinds.index(("Transcribed", None)) :] == [
        ("Transcribed", None),
        ("ReplyStarted", None),
        ("ClauseStarted", 0),
        ("ClauseStarted", 1),
        ("ReplyFinished", None),
    ]
    assert next(e for e, _ in seen if isinstance(e, Transcribed)) == Transcribed(1, "Where is the cafe?")
    assert any(isinstance(e, ReplyStarted) for e, _ in seen)
    assert trace.stream_start is not None
    for event, played in seen:
        if isinstance(event, ClauseStarted):
            clause = trace.clauses[event.index]
            assert event.text == clause.text
            assert played > trace.stream_start + clause.start_sample  # its first sample was played already


def test_the_json_lines_of_the_loops_events_keep_their_shape() -> None:
    from edgevoice.live.cli import event_record
    from edgevoice.live.events import BargeIn, ReplyStarted

    assert event_record(Partial(2, "where is")) == {"event": "partial", "turn": 2, "text": "where is"}
    assert event_record(Partial(2, "")) == {"event": "partial", "turn": 2}
    assert event_record(ReplyStarted(3)) == {"event": "speaking", "turn": 3}
    assert event_record(BargeIn(3)) == {"event": "barge_in", "turn": 3}
    assert event_record(Fallback(4, FallbackReason.LATE)) == {"event": "fallback", "turn": 4, "text": "late"}
    from edgevoice.live.events import AskedAgain, ClauseStarted, Listening, Transcribed

    for event in (Transcribed(3, "hi"), ClauseStarted(3, 0, "Hello."), AskedAgain(3), Listening(True)):
        assert event_record(event) is None  # the screen's events: no line of their own in `run --json`


def test_close_drops_a_reply_begun_at_a_pause_and_waiting_for_the_turns_end(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    loop, responder, traces, _ = make_loop(mic, spk, "The cafe is upstairs.")
    llm = responder.llm = AskedLlm("The cafe is upstairs.")
    loop.speculation.enabled = True
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.05)]))  # the visitor falls silent...
        assert llm.asked.wait(10)  # ... the reply begins, and the loop is stopped before the turn ends
        t = time.monotonic()
        assert loop.close(timeout=2.0)
        assert time.monotonic() - t < 1.0
    assert loop.speculative_replies == {"started": 1, "adopted": 0, "dropped": 1}
    assert traces == [] and spk.available() == 0  # nothing of it was heard
