"""The language model's prefill runs in chunks that a shutdown can interrupt, with the same result as one eval."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from edgevoice.config import Config
from edgevoice.engines.llamacpp import BACKGROUND_PREFILL_CHUNK, PREFILL_CHUNK, LlamaCppModel
from edgevoice.errors import LanguageModelError
from edgevoice.events import ChatMessage
from edgevoice.models.configured import resolve
from edgevoice.priority import background

pytestmark = pytest.mark.models

LONG = [
    ChatMessage("system", "You are a museum guide. " + "The museum has many rooms and many old things. " * 40),
    ChatMessage("user", "Where is the cafe?"),
]


@pytest.fixture
def model(store) -> Iterator[LlamaCppModel]:  # type: ignore[no-untyped-def]
    llm = LlamaCppModel(resolve(store, "llm", Config().models.llm), n_ctx=2048, threads=2)
    yield llm
    llm.close()


def test_chunked_prefill_leaves_the_cache_as_one_prompt_would(model: LlamaCppModel) -> None:
    n = len(model.tokens(LONG, generation_prompt=False))
    assert n > 400  # many chunks
    assert model.prefill(LONG) == n  # a fresh model: every token evaluated
    assert model.cached_tokens == n
    assert model.prefill(LONG) == 0  # all cached
    cached_reply = "".join(model.stream_reply(LONG, max_tokens=12))
    model.prefill([ChatMessage("system", "Something else entirely.")])  # evicts all but the first token or so
    fresh_reply = "".join(model.stream_reply(LONG, max_tokens=12))
    assert cached_reply == fresh_reply and cached_reply.strip()


def test_interrupt_stops_a_prefill_in_progress_and_every_later_call(model: LlamaCppModel) -> None:
    # one chunk's time on this machine, now: the bound below is relative to it (a loaded CI machine took 2.2 s to
    # stop, where an idle one takes under 1 s)
    chunk = [ChatMessage("system", "The museum has many rooms and many old things. " * 6)]
    assert len(model.tokens(chunk, generation_prompt=False)) >= PREFILL_CHUNK
    t = time.monotonic()
    model.prefill(chunk)
    chunk_s = time.monotonic() - t
    failure: list[BaseException] = []
    started = threading.Event()

    def prefill() -> None:
        started.set()
        try:
            model.prefill(LONG)
        except LanguageModelError as exc:
            failure.append(exc)

    worker = threading.Thread(target=prefill)
    worker.start()
    assert started.wait(5)
    time.sleep(0.2)  # inside the prefill (about 500 tokens: several seconds on two cores)
    t = time.monotonic()
    model.interrupt()
    worker.join(5)
    assert not worker.is_alive()
    stopped_s = time.monotonic() - t
    # the chunk in progress, at most: the whole prefill (over six chunks) would take three times this bound
    assert stopped_s < 2 * chunk_s + 0.3, (stopped_s, chunk_s)
    assert failure and getattr(failure[0], "code", "") == "llm_interrupted"
    assert 0 < model.cached_tokens < len(model.tokens(LONG, generation_prompt=False))
    with pytest.raises(LanguageModelError, match="interrupted"):
        list(model.stream_reply(LONG, max_tokens=4))


def test_a_prefill_ahead_of_time_stops_between_small_steps_when_the_critical_path_needs_the_cores(
    model: LlamaCppModel,
) -> None:
    n = len(model.tokens(LONG, generation_prompt=False))
    steps: list[int] = []

    def yield_after_two() -> bool:  # asked before each step
        steps.append(model.cached_tokens)
        return len(steps) > 2

    with background(yield_to=yield_after_two):
        done = model.prefill(LONG)
    assert done == 2 * BACKGROUND_PREFILL_CHUNK == model.cached_tokens  # two small steps, then it stopped
    assert steps[:3] == [0, BACKGROUND_PREFILL_CHUNK, 2 * BACKGROUND_PREFILL_CHUNK]
    # what was done stays: the reply's own prefill goes on from there, in full steps, and the result is the same
    assert model.prefill(LONG) == n - done
    assert model.cached_tokens == n
