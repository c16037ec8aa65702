"""The partial transcripts put into the language model's cache while the visitor speaks
(:class:`edgevoice.reply.speculation.PrefillAhead`)."""

from __future__ import annotations

import threading
import time

from edgevoice.reply.speculation import PrefillAhead


class Prefill:
    """Records each text, and can hold the first one until released."""

    def __init__(self, hold: bool = False) -> None:
        self.texts: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, text: str) -> bool:
        self.texts.append(text)
        self.started.set()
        self.release.wait(5)
        return True


def run(ahead: PrefillAhead) -> threading.Thread:
    thread = threading.Thread(target=ahead.run, daemon=True)
    thread.start()
    return thread


def wait_for(condition, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return bool(condition())


def test_only_the_latest_partial_waits_while_one_is_prefilled() -> None:
    prefill = Prefill(hold=True)
    ahead = PrefillAhead(prefill, silent=lambda: False)
    thread = run(ahead)
    ahead.offer("where is")
    assert prefill.started.wait(5)
    ahead.offer("where is the")
    ahead.offer("where is the cafe")  # replaces the one still waiting
    prefill.release.set()
    assert wait_for(lambda: ahead.prefilled == 2)
    ahead.close()
    thread.join(5)
    assert prefill.texts == ["where is", "where is the cafe"] and not thread.is_alive()


def test_nothing_is_begun_once_the_visitor_is_silent() -> None:
    prefill, silent = Prefill(), threading.Event()
    ahead = PrefillAhead(prefill, silent=silent.is_set)
    thread = run(ahead)
    silent.set()
    ahead.offer("where is the cafe")
    time.sleep(0.2)
    assert prefill.texts == [] and ahead.prefilled == 0
    silent.clear()  # the visitor speaks again: the next partial is prefilled
    ahead.offer("where is the cafe open")
    assert wait_for(lambda: ahead.prefilled == 1)
    ahead.close()
    thread.join(5)
    assert prefill.texts == ["where is the cafe open"]


def test_a_prefill_the_model_skips_is_not_counted() -> None:
    texts: list[str] = []
    ahead = PrefillAhead(lambda text: texts.append(text) or False, silent=lambda: False)
    thread = run(ahead)
    ahead.offer("hello")
    assert wait_for(lambda: texts == ["hello"])
    ahead.close()
    thread.join(5)
    assert ahead.prefilled == 0 and not thread.is_alive()
