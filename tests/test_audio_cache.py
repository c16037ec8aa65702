"""The presynthesized reply audio: the same samples as a synthesis when asked, keyed by voice, bounded, on disk, and
never changed by a reply cut off while it plays (edgevoice/reply/audio_cache.py, edgevoice/reply/presynthesis.py)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.prompt import DONT_KNOW
from edgevoice.reply.audio_cache import CachedSynthesizer, ReplyAudioCache, spoken_pieces
from edgevoice.reply.presynthesis import DiskAudio, Presynthesis, disk_audio, known_replies
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeRecognizer

RATE = 22050
DIRECT = "How much is a ticket for a student?"
"""A question the sample venue's knowledge answers outright (a direct answer, without the language model)."""


class TextVoice:
    """A deterministic voice: each sentence's samples follow from its text, one array per sentence."""

    sample_rate = RATE

    def __init__(self, seed: str = "") -> None:
        self.seed = seed
        self.texts: list[str] = []

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        for sentence in text.split(". "):
            digest = hashlib.sha256((self.seed + sentence).encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            yield rng.uniform(-0.5, 0.5, 40 * len(sentence)).astype(np.float32)


class NoModel:
    """A language model that must not be asked (direct answers and the refusal never reach it)."""

    def stream_reply(self, messages: object, *, max_tokens: int) -> Iterator[str]:
        raise AssertionError("the model was asked")


def kiosk() -> Kiosk:
    return Kiosk.from_config(Config())  # no sentence encoder, no phonemizer: the words alone ground


def responder(voice: object, kiosk: Kiosk) -> Responder:
    clock = ManualClock()
    return Responder(
        FakeRecognizer("", clock),
        kiosk.grounded(NoModel()),  # type: ignore[arg-type]
        voice,  # type: ignore[arg-type]
        kiosk.prefix,
        max_tokens=80,
        max_sentences=Config().kiosk.max_sentences,
        clock=clock,
    )


def answer(responder: Responder, question: str, cancel: threading.Event | None = None) -> list[np.ndarray]:
    played: list[np.ndarray] = []

    def emit(chunk: np.ndarray) -> int:
        played.append(chunk)
        return sum(len(c) for c in played)

    responder.respond_to(Transcript(question), ReplyTrace(1, committed=0.0), cancel or threading.Event(), emit)
    return played


def presynthesized(voice: TextVoice, k: Kiosk, *, voice_id: str = "v1", max_s: float = 600.0) -> CachedSynthesizer:
    cached = CachedSynthesizer(voice, ReplyAudioCache(max_s, RATE), voice_id)
    Presynthesis(cached, known_replies(k), max_sentences=Config().kiosk.max_sentences).run()
    return cached


@pytest.mark.parametrize("question", [DIRECT, "Can I bring my pet giraffe to the opera?"])
def test_a_known_reply_plays_the_samples_a_synthesis_would_without_a_synthesis_call(question: str) -> None:
    k = kiosk()
    uncached_voice = TextVoice()
    uncached = answer(responder(uncached_voice, k), question)
    voice = TextVoice()
    cached = presynthesized(voice, k)
    voice.texts.clear()
    played = answer(responder(cached, k), question)
    assert voice.texts == []  # nothing synthesized at the commit
    assert cached.hits == len(uncached_voice.texts) and cached.misses == 0
    assert len(played) == len(uncached) > 0
    assert all(np.array_equal(a, b) for a, b in zip(played, uncached, strict=True))


def test_the_pieces_made_ahead_are_those_the_responder_asks_for() -> None:
    k = kiosk()
    max_sentences = Config().kiosk.max_sentences
    direct = [(e.question, e.answer) for e in k.entries if e.question and k.ground(e.question).direct == e.answer]
    assert len(direct) >= 5
    for question, reply in [*direct, ("Can I bring my pet giraffe to the opera?", DONT_KNOW)]:
        voice = TextVoice()
        answer(responder(voice, k), question)
        assert voice.texts == spoken_pieces(reply, max_sentences=max_sentences), question
    # a reply of three sentences is cut as the responder cuts it: the first clause, then whole sentences, two at most
    pieces = spoken_pieces("We open at 9 am, every day. Tickets cost 5 euros. Dogs may not enter.", max_sentences=2)
    assert pieces == ["We open at nine AM,", "every day.", "Tickets cost five euros."]


def test_the_cache_is_keyed_by_the_voice_and_its_settings() -> None:
    k = kiosk()
    cache = ReplyAudioCache(600.0, RATE)
    first = CachedSynthesizer(TextVoice(), cache, "voice-a")
    Presynthesis(first, known_replies(k), max_sentences=2).run()
    other_voice = TextVoice(seed="slower")
    other = CachedSynthesizer(other_voice, cache, "voice-a length_scale=1.2")
    played = answer(responder(other, k), DIRECT)
    assert other.hits == 0 and other_voice.texts  # the other voice's audio is its own
    reference = answer(responder(TextVoice("slower"), k), DIRECT)
    assert all(np.array_equal(a, b) for a, b in zip(played, reference, strict=True))


def test_voice_id_changes_with_the_files_and_the_settings(tmp_path: Path) -> None:
    from edgevoice.models.configured import voice_id
    from edgevoice.models.store import ModelStore

    store = ModelStore(tmp_path / "models")
    onnx, json = tmp_path / "voice.onnx", tmp_path / "voice.onnx.json"
    onnx.write_bytes(b"weights")
    json.write_text("{}")
    a = voice_id(store, (onnx, json), "scales=0.667,1,0.8")
    assert a == voice_id(store, (onnx, json), "scales=0.667,1,0.8")
    assert a != voice_id(store, (onnx, json), "scales=0.667,1.2,0.8")
    onnx.write_bytes(b"other weights")
    assert a != voice_id(store, (onnx, json), "scales=0.667,1,0.8")


def test_the_cache_is_bounded_by_seconds_of_audio_least_recently_used_out() -> None:
    cache = ReplyAudioCache(1.0, 1000)
    second = np.zeros(400, np.float32)
    assert cache.put("v", "a", [second]) and cache.put("v", "b", [second])
    assert cache.get("v", "a") is not None  # "a" is now the more recently used
    assert cache.put("v", "c", [second])
    assert ("v", "b") not in cache and ("v", "a") in cache and ("v", "c") in cache
    assert cache.seconds == pytest.approx(0.8) and cache.evictions == 1
    assert not cache.put("v", "d", [second], evict=False) and len(cache) == 2  # full: nothing dropped
    assert not cache.put("v", "e", [np.zeros(1001, np.float32)])  # larger than the whole bound


def test_presynthesis_stops_when_the_cache_is_full_keeping_the_first_replies() -> None:
    k = kiosk()
    voice = TextVoice()
    cached = CachedSynthesizer(voice, ReplyAudioCache(1.0, RATE), "v")
    run = Presynthesis(cached, known_replies(k), max_sentences=2)
    run.run()
    assert run.full and 0 < len(cached.cache) < len(run.pieces)
    assert cached.cache.seconds <= 1.0
    assert cached.cached(spoken_pieces(DONT_KNOW, max_sentences=2)[0])  # the most needed first


def test_a_reply_cut_off_while_it_plays_leaves_the_cached_audio_unchanged() -> None:
    k = kiosk()
    cached = presynthesized(TextVoice(), k)
    before = answer(responder(cached, k), DIRECT)
    cancel = threading.Event()

    def barge_in(chunk: np.ndarray) -> int:
        cancel.set()  # the visitor speaks over the first chunk
        with pytest.raises(ValueError):
            chunk[:10] = 0.0  # no consumer can write into the cached audio
        return len(chunk)

    responder(cached, k).respond_to(Transcript(DIRECT), ReplyTrace(2, committed=0.0), cancel, barge_in)
    after = answer(responder(cached, k), DIRECT)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_presynthesis_stopped_mid_text_keeps_nothing_of_it() -> None:
    stop = threading.Event()

    class StoppingVoice(TextVoice):
        def synthesize(self, text: str) -> Iterator[np.ndarray]:
            for i, chunk in enumerate(super().synthesize(text)):
                if i == 1:
                    stop.set()  # the appliance shuts down between two sentences
                yield chunk

    cached = CachedSynthesizer(StoppingVoice(), ReplyAudioCache(60.0, RATE), "v")
    assert cached.remember("One sentence. Another sentence.", stop) is None
    assert len(cached.cache) == 0


def test_a_restart_reads_the_pieces_back_from_disk_and_prunes_stale_ones(tmp_path: Path) -> None:
    k = kiosk()
    replies = known_replies(k)
    first_voice = TextVoice()
    first = CachedSynthesizer(first_voice, ReplyAudioCache(600.0, RATE), "v")
    (tmp_path / ("0" * 64 + ".npz")).write_bytes(b"a piece of a knowledge changed since")
    run = Presynthesis(first, replies, max_sentences=2, disk=DiskAudio(tmp_path, "v"))
    run.run()
    assert run.synthesized == len(run.pieces) and run.from_disk == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(DiskAudio(tmp_path, "v").name(t) for t in run.pieces)

    voice = TextVoice()
    again = CachedSynthesizer(voice, ReplyAudioCache(600.0, RATE), "v")
    restart = Presynthesis(again, replies, max_sentences=2, disk=DiskAudio(tmp_path, "v"))
    restart.run()
    assert voice.texts == [] and restart.from_disk == len(restart.pieces)
    for text in restart.pieces:
        read, made = again.cache.get("v", text), first.cache.get("v", text)
        assert read is not None and made is not None
        assert all(np.array_equal(a, b) for a, b in zip(read, made, strict=True))

    other = Presynthesis(
        CachedSynthesizer(TextVoice("b"), ReplyAudioCache(600.0, RATE), "w"), replies[:1], max_sentences=2
    )
    other.disk = DiskAudio(tmp_path, "w")
    other.run()
    assert other.from_disk == 0  # another voice never reads this one's audio


def test_an_unwritable_directory_leaves_the_audio_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    disk = disk_audio(str(blocker / "replies"), "v")
    assert disk is not None
    cached = CachedSynthesizer(TextVoice(), ReplyAudioCache(600.0, RATE), "v")
    run = Presynthesis(cached, [DONT_KNOW], max_sentences=2, disk=disk)
    run.run()
    assert not disk.writable and run.synthesized == len(run.pieces) and all(cached.cached(t) for t in run.pieces)
    assert disk_audio("none", "v") is None


def test_presynthesis_waits_while_a_turn_is_in_progress() -> None:
    voice = TextVoice()
    cached = CachedSynthesizer(voice, ReplyAudioCache(600.0, RATE), "v")
    idle = threading.Event()
    run = Presynthesis(cached, [DONT_KNOW], max_sentences=2, idle=idle.is_set, nice=0).start()
    assert not run.finished.wait(0.3) and voice.texts == []  # a visitor is speaking
    idle.set()
    assert run.finished.wait(10.0) and voice.texts == run.pieces
    run.close()


def test_the_real_voice_plays_a_direct_answer_from_the_presynthesized_audio(store) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.app import cached_voice
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.models.configured import piper_files, voice_id

    files = piper_files(store, Config().models.tts)
    piper = PiperSynthesizer(*files, noise_scale=0.0, noise_w=0.0)  # without sampling noise: comparable samples
    calls: list[str] = []

    class Counted:
        sample_rate = piper.sample_rate

        def synthesize(self, text: str) -> Iterator[np.ndarray]:
            calls.append(text)
            return piper.synthesize(text)

    voice = cached_voice(Counted(), Config(), voice_id(store, files, piper.settings))  # type: ignore[arg-type]
    k = kiosk()
    reply = k.ground(DIRECT).direct
    assert reply is not None
    run = Presynthesis(voice, [reply], max_sentences=Config().kiosk.max_sentences)
    run.run()
    assert calls == run.pieces and voice.cache.seconds > 1.0
    calls.clear()
    played = answer(responder(voice, k), DIRECT)
    assert calls == [] and voice.hits == len(run.pieces)  # no synthesis call at the commit
    reference = answer(responder(piper, k), DIRECT)
    assert np.array_equal(np.concatenate(played), np.concatenate(reference))


def test_what_the_disk_holds_is_read_before_anything_waits_for_the_voice(tmp_path: Path) -> None:
    replies = known_replies(kiosk())
    first = Presynthesis(
        CachedSynthesizer(TextVoice(), ReplyAudioCache(600.0, RATE), "v"), replies, max_sentences=2,
        disk=DiskAudio(tmp_path, "v"),
    )  # fmt: skip
    first.run()
    gone = first.pieces[0]  # the refusal's first clause: a changed wording, say
    (tmp_path / DiskAudio(tmp_path, "v").name(gone)).unlink()
    voice = TextVoice()
    cached = CachedSynthesizer(voice, ReplyAudioCache(600.0, RATE), "v")
    seen: list[int] = []

    def idle() -> bool:  # asked only before the voice is: by then every piece on disk is in memory
        seen.append(len(cached.cache))
        return True

    again = Presynthesis(cached, replies, max_sentences=2, disk=DiskAudio(tmp_path, "v"), idle=idle)
    again.run()
    assert seen == [len(first.pieces) - 1] and voice.texts == [gone] and again.from_disk == len(first.pieces) - 1
