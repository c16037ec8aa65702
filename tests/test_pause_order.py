"""What the listener decides at a pause, stepped frame by frame on a manual clock (tests/stepped_loop.py): the words'
verdict beside Smart Turn's, the wait it asks for, the reply begun for a pause, the partial transcripts read ahead,
and the recognition done while the visitor speaks. Where the loop would run a job on the recognition worker, the
harness runs it between two frames: ``in_jobs`` tells the two places apart."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.audio.ring import SharedRing
from edgevoice.events import Transcript
from edgevoice.listen.endpointing import EndpointingConfig, TurnEndReason
from edgevoice.live.events import Partial, TurnCommitted
from tests.stepped_loop import RATE, SteppedListener, mic, silence, speech

__all__ = ["mic"]  # the fixture

pytestmark = pytest.mark.unit

WORDS_ON = EndpointingConfig(text_incomplete_below=0.005)


class WordsJudge:
    """A text end-of-turn judge that gives ``p`` and keeps what it was asked about, and whether it was asked by a
    recognition job (``in_jobs``, once :attr:`ears` is set)."""

    def __init__(self, p: float) -> None:
        self.p = p
        self.texts: list[str] = []
        self.in_jobs: list[bool] = []
        self.ears: SteppedListener | None = None

    def probability_complete(self, text: str) -> float:
        self.texts.append(text)
        self.in_jobs.append(self.ears is not None and self.ears.in_jobs)
        return self.p


def listening(mic: SharedRing, judge: WordsJudge, endpoint: EndpointingConfig = WORDS_ON, **kwargs: object):  # type: ignore[no-untyped-def]
    ears = SteppedListener(mic, endpoint=endpoint, words=judge, **kwargs)  # type: ignore[arg-type]
    judge.ears = ears
    return ears


def test_the_words_are_not_judged_when_the_check_is_off(mic: SharedRing) -> None:
    judge = WordsJudge(0.0)
    ears = listening(mic, judge, EndpointingConfig(text_incomplete_below=0.0))
    ears.hear(silence(0.3), speech(1.0), silence(2.0))
    assert judge.texts == [] and [t.reason for t in ears.committed()] == [TurnEndReason.COMPLETE]


@pytest.mark.parametrize(("p", "reason"), [(0.001, TurnEndReason.SILENCE_TIMEOUT), (0.3, TurnEndReason.COMPLETE)])
def test_a_pause_that_sounds_complete_waits_when_its_words_do_not_end_a_sentence(
    mic: SharedRing, p: float, reason: TurnEndReason
) -> None:
    judge = WordsJudge(p)
    ears = listening(mic, judge)
    ears.hear(silence(0.3), speech(1.0), silence(2.0))
    # the speculative transcript, at the visitor's silence; before it, a partial transcript read ahead
    assert judge.texts[-1] == "Where is the cafe?" and len(judge.texts) <= 1 + ears.asr.partials
    (turn,) = ears.committed()
    assert turn.reason is reason
    silence_s = turn.committed_t - turn.speech_end_t
    if reason is TurnEndReason.COMPLETE:  # at the pause: silence_ms (192 ms), and the frame it ends in
        assert silence_s < WORDS_ON.silence_ms / 1000 + 2 * 512 / RATE
    else:  # held for the incomplete wait, then ended by the silence
        assert silence_s >= WORDS_ON.incomplete_max_silence_ms / 1000 - 512 / RATE


@pytest.mark.parametrize(("p", "started"), [(0.001, 0), (0.3, 1)])
def test_the_words_are_judged_by_the_recognition_job_and_a_reply_begins_only_after_a_whole_sentence(
    mic: SharedRing, p: float, started: int
) -> None:
    judge = WordsJudge(p)
    ears = listening(mic, judge, speculative=True)
    ears.hear(silence(0.3), speech(1.0), silence(2.0))
    # asked by the recognition job right after its decode, never by the listener (which asks Smart Turn)
    assert judge.in_jobs and all(judge.in_jobs)
    # half a sentence gets no reply begun for it; a whole one gets it, and it is the one adopted
    assert ears.speculation.counts == {"started": started, "adopted": started, "dropped": 0}
    assert [e.adopted for e in ears.reply.told if isinstance(e, TurnCommitted)] == [bool(started)]


def test_a_turn_with_nothing_recognized_ends_without_waiting_for_a_verdict_on_no_words(mic: SharedRing) -> None:
    judge = WordsJudge(0.3)
    ears = listening(mic, judge, speculative=True)
    ears.recognizer.text = ""  # a cough, a door: speech to the VAD, no words
    ears.hear(silence(0.3), speech(1.0), silence(0.4))
    # the listener is told that the speculative decode heard nothing and that there are no words to judge (it used to
    # wait 0.4 s for a decode and 1.5 s for a verdict that never came); nothing is judged, begun or prefilled
    assert ears.speculation.decoded.is_set() and ears.speculation.judged.is_set()
    assert ears.speculation.words_complete is None
    assert [t.reason for t in ears.committed()] == [TurnEndReason.COMPLETE]
    assert "" not in judge.texts and ears.speculation.counts["started"] == 0 and ears.prefilled == []


@pytest.mark.parametrize("goes_on", [False, True])
def test_an_unsure_pause_keeps_the_reply_begun_for_it_until_its_shorter_silence_ends_the_turn(
    mic: SharedRing, goes_on: bool
) -> None:
    # words between text_incomplete_below and text_complete_at, a sound that is not sure: unsure
    judge = WordsJudge(0.03)
    ears = listening(mic, judge, speculative=True)
    if goes_on:  # the visitor goes on 0.5 s into the pause: no reply to the first half
        ears.hear(silence(0.3), speech(1.0), silence(0.5), speech(1.0), silence(2.0))
    else:
        ears.hear(silence(0.3), speech(1.0), silence(2.0))
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.SILENCE_TIMEOUT
    silence_s = turn.committed_t - turn.speech_end_t
    assert WORDS_ON.unsure_silence_ms / 1000 <= silence_s < WORDS_ON.unsure_silence_ms / 1000 + 2 * 512 / RATE
    assert len(turn.audio) / RATE > (2.4 if goes_on else 1.2)  # the turn holds what was said after the pause too
    counts = ears.speculation.counts
    if goes_on:  # the reply begun at the first pause was dropped, the one for the second adopted
        assert counts == {"started": 2, "adopted": 1, "dropped": 1}
    else:  # the reply begun at the pause stood through the wait and is the one heard
        assert counts == {"started": 1, "adopted": 1, "dropped": 0}


def test_the_words_judge_reads_the_partial_transcripts_ahead_and_none_once_the_visitor_is_silent(
    mic: SharedRing,
) -> None:
    judge = WordsJudge(0.3)
    ears = listening(mic, judge)
    ears.hear(silence(0.3), speech(1.5))  # a partial transcript after a second of speech
    # read by the judge in the recognition job as it comes, while the visitor still speaks
    assert judge.texts == ["Where is the cafe?"] and judge.in_jobs == [True] and ears.asr.partials == 1
    ears.hear(speech(0.5), silence(2.0))
    # the speculative transcript last, at the silence (a partial decoded as the visitor fell silent is not read)
    assert judge.texts[-1] == "Where is the cafe?" and 2 <= len(judge.texts) <= ears.asr.partials + 1
    assert all(judge.in_jobs) and len(ears.committed()) == 1
    # after the silence nothing is read ahead: a partial then would hold up the speculative decode
    read = len(judge.texts)
    ears.speculation.open_turn(99)
    ears.speculation.silence(lambda: 1)
    ears.speculation.on_partial("Where is")
    assert len(judge.texts) == read


class CountingRecognizer:
    """Names each piece of audio it hears by its length, so joins and tails can be checked."""

    sample_rate = RATE

    def __init__(self) -> None:
        self.heard: list[tuple[bool, int]] = []
        """(in a recognition job, samples) of every final decode."""
        self.ears: SteppedListener | None = None

    def transcribe_partial(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        return self._name(audio)

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        self.heard.append((self.ears is not None and self.ears.in_jobs, len(audio)))
        return self._name(audio)

    def _name(self, audio: np.ndarray) -> Transcript:
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


def test_recognition_runs_while_the_visitor_speaks_and_only_the_tail_is_left(mic: SharedRing) -> None:
    recognizer = CountingRecognizer()
    ears = SteppedListener(mic, recognizer=recognizer, turn_model=IncompleteThenComplete())
    recognizer.ears = ears
    # 1.6 s of speech (a partial transcript comes while it goes on), a 0.4 s pause the end-of-turn model calls
    # incomplete, 0.5 s more, then silence
    ears.hear(silence(0.3), speech(1.6))
    (partial,) = ears.published(Partial)
    assert partial.text.startswith("part")  # while the visitor speaks
    ears.hear(silence(0.4), speech(0.5), silence(0.6))
    (turn,) = ears.committed()
    # the stable first part was decoded at the pause, the rest at the end, and the two joined
    assert ears.finish(turn) == "part16 part5"
    # the part before the pause was decoded once, speculatively, when the visitor paused, and adopted as stable
    assert ears.asr.segments_decoded == 0
    # the tail was decoded the moment the visitor fell silent (speculation), before the turn was committed, and
    # it held only the audio after the pause; the answerer had nothing left to decode
    assert ears.asr.speculations_used == 1
    assert [in_job for in_job, _ in recognizer.heard] == [True, True]
    assert recognizer.heard[-1][1] < (0.5 + 0.7) * RATE


@pytest.mark.parametrize(
    ("p", "words_first", "asked", "reason"),
    [
        (0.3, True, False, TurnEndReason.COMPLETE),  # the words end the sentence: Smart Turn would change nothing
        (0.001, True, False, TurnEndReason.SILENCE_TIMEOUT),  # half a sentence whatever it sounds like
        (0.03, True, True, TurnEndReason.SILENCE_TIMEOUT),  # unsure words: the sound is asked (0.9: not sure)
        (0.3, False, True, TurnEndReason.COMPLETE),  # words_first off: both verdicts at every pause, as before
    ],
)
def test_smart_turn_is_asked_only_when_the_words_leave_the_pause_open(
    mic: SharedRing, p: float, words_first: bool, asked: bool, reason: TurnEndReason
) -> None:
    judge = WordsJudge(p)
    endpoint = EndpointingConfig(text_incomplete_below=0.005, words_first=words_first)
    ears = listening(mic, judge, endpoint, speculative=True)
    ears.hear(silence(0.3), speech(1.0), silence(2.0))
    (turn,) = ears.committed()
    assert turn.reason is reason
    assert (ears.smart_turn.calls > 0) is asked
    assert ears.smart_turn.calls <= 1  # once, early or at the pause, never both
    assert judge.texts[-1] == "Where is the cafe?"
