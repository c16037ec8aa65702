"""Conversation memory on the real language model: the history grows, is trimmed to its budget, and the prompt the
model evaluates per turn stays bounded, so time to first token stays flat over a long conversation."""

from __future__ import annotations

import statistics
import threading
from dataclasses import replace

import pytest

from edgevoice.app import build_assistant
from edgevoice.clock import MonotonicClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.interfaces import Engines
from edgevoice.reply.trace import ReplyTrace

pytestmark = pytest.mark.models

QUESTIONS = (
    "When is the museum open?",
    "How much are tickets for adults?",
    "Where can I leave my bag?",
    "Is there a cafe?",
    "Where is the shipwreck gallery?",
    "Are there guided tours?",
    "Can I take photos?",
    "Is there Wi-Fi?",
)


def test_history_is_trimmed_and_the_prompt_stays_bounded(engines: Engines) -> None:
    # every reply from the model: a direct answer (the operator's text) is not in the model's cache, so re-evaluating
    # the conversation would cost that whole answer, not the tail of a generated one
    config = Config()
    config = replace(config, kiosk=replace(config.kiosk, direct_answers=False))
    assistant = build_assistant(config, engines, clock=MonotonicClock())
    assistant.warm_up()
    responder = assistant.responder
    responder.history_tokens = 200
    llm = engines.llm
    prefix_tokens = llm.count_tokens(assistant.prefix)  # type: ignore[attr-defined]
    prompts, ttfts, recomputed = [], [], []
    for turn, question in enumerate(QUESTIONS * 2, 1):
        trace = ReplyTrace(turn, committed=0.0)
        before = len(responder.history)
        responder.respond_to(Transcript(question), trace, threading.Event(), lambda audio: len(audio))
        responder.commit(trace, None)
        assert len(responder.history) <= before + 2
        assert trace.first_token is not None and trace.transcript_done is not None
        ttfts.append(trace.first_token - trace.transcript_done)
        prompts.append(llm.count_tokens([*assistant.prefix, *responder.history]))  # type: ignore[attr-defined]
        responder.trim_history()
        recomputed.append(llm.prefill([*assistant.prefix, *responder.history]))  # type: ignore[attr-defined]
    # the history budget holds: the prompt never grows past prefix + budget + one exchange
    assert max(prompts) <= prefix_tokens + 200 + 120, prompts
    assert len(responder.history) < 2 * len(QUESTIONS) * 2  # old exchanges were dropped
    # the cached prefix is never dropped, and the trimmed history is still cached after it: re-evaluating the
    # whole conversation so far costs only the tail of the last reply
    assert llm.prefill(assistant.prefix) == 0  # type: ignore[attr-defined]
    assert max(recomputed[4:]) < 40, recomputed  # trimming shifted the cache instead of invalidating it
    early, late = statistics.median(ttfts[:4]), statistics.median(ttfts[-4:])
    print(f"\ntime to first token, median of turns 1-4: {early * 1000:.0f} ms, of turns 13-16: {late * 1000:.0f} ms")
