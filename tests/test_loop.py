"""The live loop on its real threads, with fake engines, in-memory rings and a stand-in for the output device: what
only the threads together can show (a turn handed from the listener's thread to the responder's, barge-in flushing the
playing output, the capture callback pausing it, a hung engine while the listener ticks on, close() joining every
thread). Each test's docstring says what about the threading it tests.

Which turn is committed when, rejoin, withdrawal, the reply begun early, the pause's verdicts and activation are
stepped on a manual clock, without threads: tests/test_loop_order.py, test_pause_order.py, test_activation_order.py."""

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
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.listen.endpointing import EndpointingConfig
from edgevoice.listen.turn import Turn
from edgevoice.live.events import Fallback, FallbackReason, LoopEvent, Partial, ReplyFinished
from edgevoice.live.loop import LoopOptions, VoiceLoop
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.stepped_loop import FALLBACK, CompleteTurn, EnergyVad, silence, speech

__all__ = ["CompleteTurn", "EnergyVad", "rings", "silence", "speech"]  # shared with the other loop tests


class CountingVad(EnergyVad):
    """Sets ``heard`` once it has judged ``frames`` frames."""

    def __init__(self, frames: int) -> None:
        self.frames, self.heard = frames, threading.Event()

    def probability(self, frame: np.ndarray) -> float:
        self.frames -= 1
        if self.frames <= 0:
            self.heard.set()
        return super().probability(frame)


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
    """Threads: the listener's thread hands the turn to the responder's, whose trace comes only once the output
    device's thread has played the reply out of the ring."""
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
    """Threads: a barge-in told on the listener's thread flushes what the output device's thread has not played yet
    and cancels the responder's thread mid-reply; the history keeps what the device played."""
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


class RecordingPrefillLlm(FakeLlm):
    """Keeps the visitor's words of every prompt it prefills, and the thread that asked; sets ``prefilling`` at the
    first."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply, ManualClock(), per_token=0.0)
        self.prefilled: list[tuple[str, str]] = []
        self.prefilling = threading.Event()

    def prefill(self, messages):  # type: ignore[no-untyped-def]
        self.prefilled.append((messages[-1].content, threading.current_thread().name))
        self.prefilling.set()
        return 1


@pytest.mark.parametrize("on", [True, False])
def test_a_partial_transcript_is_prefilled_while_the_visitor_speaks(
    rings: tuple[SharedRing, SharedRing], on: bool
) -> None:
    """Threads: the prefill thread takes the partial transcript from the recognition worker while the listener's
    thread still hears the visitor speak; none is taken once the visitor is silent."""
    mic, spk = rings
    llm = RecordingPrefillLlm("Upstairs.")
    loop, _, traces, done = make_loop(mic, spk, "Upstairs.", llm=llm, prefill_while_speaking=on)
    partial = threading.Event()
    loop.bus.subscribe(lambda event: partial.set() if isinstance(event, Partial) else None, name="test-partials")
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.5)]))  # a partial transcript after a second of speech
        # with the option, on its own thread, before the visitor has stopped speaking; without, no prefill thread
        assert (llm.prefilling if on else partial).wait(10)
        assert llm.prefilled == ([("Where is the cafe?", "edgevoice-prefill")] if on else [])
        mic.write(np.concatenate([speech(0.5), silence(2.0)]))
        assert done.wait(10)
    assert traces[0].reply == "Upstairs."
    # none once the visitor is silent: after the speculative transcript's prefill (the recognition worker's), only
    # the responder's (the conversation after the reply)
    threads = [thread for _, thread in llm.prefilled]
    assert "edgevoice-asr" in threads
    assert set(threads[threads.index("edgevoice-asr") :]) <= {"edgevoice-asr", "edgevoice-responder"}


def test_close_ends_the_threads_of_a_loop_listening_to_silence(rings: tuple[SharedRing, SharedRing]) -> None:
    """Threads: close() stops the listener's thread between two frames and the responder's thread waiting for a turn,
    and says that both ended within its time limit."""
    mic, spk = rings
    loop, _, traces, _ = make_loop(mic, spk, "Never.")
    vad = loop.listener.vad = CountingVad(int(1.9 * RATE / 512))
    loop.start()
    mic.write(silence(2.0))
    assert vad.heard.wait(5)
    assert loop.close(timeout=2.0)  # True: every thread joined within close's own limit
    assert traces == [] and loop.listener.turn_model.calls == 0  # type: ignore[attr-defined]


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
    """Threads: the engine hangs on the responder's thread while the listener's thread ticks the reply budget on and
    queues the phrase, which the output device's thread plays; what the engine makes once released is not heard.
    (When the phrase comes, to the frame, is stepped on a manual clock in tests/test_loop_order.py.)"""
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
    assert second.fallback is None and second.reply == "It is upstairs."
    audio = np.concatenate(player.played)
    assert np.sum(np.isclose(audio, -0.2)) == len(FALLBACK)
    # only the second turn's reply: nothing the hung engine produced once released
    assert np.sum(np.isclose(audio, 0.1)) == sum(c.end_sample - c.start_sample for c in second.clauses) > 0


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
    """Threads: the capture callback's gate pauses the output device's playback at once, before the listener's thread
    has judged the sound; the reply resumes when the listener hears no speech."""
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
    within ``rejoin_ms`` of the commit). Threads: the capture callback, the listener's thread and the playing
    output, as in the test above."""
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
    the engines: freeing llama.cpp under a running decode crashed `edgevoice run` on SIGTERM). Threads: the
    recognition worker is inside the model when close() is called from another thread."""
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
        # close's own limit, kept with a thread that will not stop (the bound is its contract, not a speed)
        assert time.monotonic() - t < 0.5 + 0.5
        assert llm.interrupted.is_set()
        assert ended is (not stubborn)
    finally:
        llm.release.set()
        loop.close(timeout=5)


class ClauseSynth(FakeSynth):
    """Half a second of audio per clause, in five chunks: the playback takes a while to reach the next clause."""

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        for _ in range(5):
            yield np.full(2205, 0.1, dtype=np.float32)


def test_each_clause_is_announced_when_its_first_sample_is_played(rings: tuple[SharedRing, SharedRing]) -> None:
    """Real threads (the captions' poller, the player): published in order, and never before the sound."""
    from edgevoice.live.events import ClauseStarted, ReplyQueued, ReplyStarted, Shutdown, Transcribed

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
    skip = (Partial, Shutdown, ReplyQueued)  # ReplyQueued: as the clauses play (tests/test_actions_early.py)
    kinds = [(type(e).__name__, getattr(e, "index", None)) for e, _ in seen if not isinstance(e, skip)]
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


def test_close_drops_a_reply_begun_at_a_pause_and_waiting_for_the_turns_end(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    """Threads: the responder's thread waits for the listener's decision on the reply begun early (computed on a
    thread of its own) when close() comes: it is dropped, and every thread ends."""
    mic, spk = rings
    loop, responder, traces, _ = make_loop(mic, spk, "The cafe is upstairs.")
    llm = responder.llm = AskedLlm("The cafe is upstairs.")
    loop.speculation.enabled = True
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.05)]))  # the visitor falls silent...
        assert llm.asked.wait(10)  # ... the reply begins, and the loop is stopped before the turn ends
        assert loop.close(timeout=2.0)  # True: every thread joined within close's own limit
    assert loop.speculative_replies == {"started": 1, "adopted": 0, "dropped": 1}
    assert traces == [] and spk.available() == 0  # nothing of it was heard
