"""The soak's leak check on a fake turn, measured as the soak measures (this process's RSS after each turn): a leak
of 1 MB a turn fails CI's 40-turn soak, and a turn that frees what it took passes it."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable

import pytest

from edgevoice.selftest.cpu import rss_mb
from tests.memory_growth import CI_TURNS, WARM_UP, WINDOW, growth_mb, limit_mb

MB = 1 << 20


def soak(turn: Callable[[], None]) -> list[float]:
    """CI's soak, its engines left out: ``turn`` run as many times, the RSS read after each."""
    rss = []
    for _ in range(CI_TURNS):
        turn()
        rss.append(rss_mb(os.getpid()))
    return rss


def leak_one_mb(kept: list[mmap.mmap]) -> None:
    """1 MB of new pages from the system, written so that they are resident: a heap block could reuse pages that a
    long test session freed earlier, and then nothing would grow."""
    pages = mmap.mmap(-1, MB)
    pages.write(b"\x01" * MB)
    kept.append(pages)


def test_a_leak_of_one_mb_a_turn_fails_the_ci_soak() -> None:
    kept: list[mmap.mmap] = []
    rss = soak(lambda: leak_one_mb(kept))
    assert growth_mb(rss, WARM_UP) >= CI_TURNS - WARM_UP - 1
    assert growth_mb(rss, WARM_UP) > limit_mb(CI_TURNS, WARM_UP) * 2


def test_a_turn_that_frees_what_it_took_passes_the_ci_soak() -> None:
    def turn() -> None:
        reply = [b"\x01" * MB for _ in range(8)]
        del reply

    rss = soak(turn)
    assert growth_mb(rss, WARM_UP) < limit_mb(CI_TURNS, WARM_UP)


def test_one_high_reading_is_not_growth() -> None:
    rss = [100.0] * 40
    rss[-1] = 150.0  # a reply's buffers caught in the last reading
    assert growth_mb(rss, 20) == 0.0
    with pytest.raises(ValueError, match="need 5 turns"):
        growth_mb(rss[: 20 + WINDOW - 1], 20)


def test_the_bound_grows_with_the_run_by_the_measured_rate() -> None:
    assert limit_mb(40, 20) == pytest.approx(8.2)
    assert limit_mb(1000, 20) == pytest.approx(17.8)  # the 1,000-turn run grew 7.4 MB (docs/decisions/)
