#!/usr/bin/env python3
"""The direct-answer path's commit to first audio, with and without the presynthesized reply audio ([tts]
presynthesize), on the real voice and the sample venue's knowledge; prints the medians and their ratio.

    .venv/bin/python scripts/bench_presynthesis.py --rounds 3

Each question one entry answers outright (a direct answer) is answered by the live responder (synthesis on its own
thread, as in `edgevoice run`) from its transcript, with the voice asked at the commit and with its clauses made
ahead; the time is from the call to the first audio handed to playback. The two are interleaved question by question
so that both see the machine's load of the moment. Also prints the cache's size and the time to make it.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from edgevoice.app import cached_voice
from edgevoice.app_engines import open_voice
from edgevoice.clock import MonotonicClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.models.configured import model_store, piper_files, voice_id
from edgevoice.reply.presynthesis import Presynthesis, known_replies
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace


class NoModel:
    def stream_reply(self, messages: object, *, max_tokens: int) -> object:
        raise AssertionError("a direct answer reached the model")


def first_audio_ms(voice: object, kiosk: Kiosk, question: str) -> float:
    clock = MonotonicClock()
    responder = Responder(
        None,  # type: ignore[arg-type]
        kiosk.grounded(NoModel()),  # type: ignore[arg-type]
        voice,  # type: ignore[arg-type]
        kiosk.prefix,
        max_tokens=80,
        max_sentences=Config().kiosk.max_sentences,
        clock=clock,
        synthesis_thread=True,
    )
    first: list[float] = []

    def emit(chunk: object) -> int:
        if not first:
            first.append(time.perf_counter())
        return 0

    t = time.perf_counter()
    responder.respond_to(Transcript(question), ReplyTrace(1, committed=clock.now()), threading.Event(), emit)
    return (first[0] - t) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="answers per question and variant")
    args = parser.parse_args()
    config = Config()
    store = model_store(config)
    files = piper_files(store, config.models.tts)
    piper = open_voice(config, store, files=files, provider="cpu")
    kiosk = Kiosk.from_config(config)  # words only: grounding is the same for both variants
    voice = cached_voice(piper, config, voice_id(store, files, piper.settings))
    t = time.perf_counter()
    run = Presynthesis(voice, known_replies(kiosk), max_sentences=config.kiosk.max_sentences)
    run.run()
    made_s = time.perf_counter() - t
    print(
        f"presynthesis: {len(run.pieces)} pieces, {voice.cache.seconds:.0f} s of audio, "
        f"{voice.cache.nbytes / 1e6:.1f} MB, made in {made_s:.1f} s"
    )
    questions = [e.question for e in kiosk.entries if e.question and kiosk.ground(e.question).direct == e.answer]
    without: list[float] = []
    with_cache: list[float] = []
    for _ in range(args.rounds):
        for question in questions:
            without.append(first_audio_ms(piper, kiosk, question))
            with_cache.append(first_audio_ms(voice, kiosk, question))
    a, b = statistics.median(without), statistics.median(with_cache)
    print(f"direct answers: {len(questions)} questions x {args.rounds} rounds; commit -> first audio (ms)")
    print(f"  synthesized at the commit: p50 {a:7.1f}  max {max(without):7.1f}")
    print(f"  presynthesized:            p50 {b:7.1f}  max {max(with_cache):7.1f}")
    print(f"  ratio (with / without): {b / a:.3f}; cache hits {voice.hits}, misses {voice.misses}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
