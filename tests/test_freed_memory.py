"""Memory handed back between turns: reference cycles collected, freed pages returned (glibc's ``malloc_trim``)."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator

import pytest

from edgevoice.memory import _malloc_trim, release_freed_memory, resettle, settle
from edgevoice.selftest.cpu import rss_mb

CHUNK = 64 * 1024
"""Below glibc's mmap threshold (128 KiB at the start): the chunks come from the heap, not from mmaps of their own."""


class Node:
    """An object that refers to itself: reference counting alone never frees it."""

    def __init__(self) -> None:
        self.me = self
        self.payload = bytearray(1 << 20)


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    """Python's own collections off (they could come at any allocation), and nothing frozen before or after (a
    loop harness earlier in the session settles the process)."""
    gc.unfreeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_pages_of_memory_freed_inside_the_heap_go_back_to_the_system() -> None:
    if _malloc_trim() is None:
        pytest.skip("not glibc: no malloc_trim")
    chunks = [bytearray(CHUNK) for _ in range(2000)]  # 125 MiB, every page touched (zero-filled)
    kept = chunks[::20]  # every twentieth stays: free() alone can give back only the top of the heap
    del chunks
    before = rss_mb(os.getpid())
    release_freed_memory()
    after = rss_mb(os.getpid())
    assert before - after > 60, (before, after)  # about 119 MiB were freed inside the heap
    assert len(kept) == 100


@pytest.mark.usefixtures("no_automatic_collection")
def test_a_reference_cycle_made_during_a_turn_is_collected_after_it() -> None:
    settle()
    node = weakref.ref(Node())
    assert node() is not None  # unreachable, but in a cycle
    release_freed_memory()
    assert node() is None


@pytest.mark.usefixtures("no_automatic_collection")
def test_what_start_up_left_is_frozen_until_the_process_settles_again() -> None:
    assert resettle() is None  # never settled: nothing done
    old = Node()
    settle()
    frozen = weakref.ref(old)
    del old  # a long-lived object replaced (a reloaded kiosk's old one)
    release_freed_memory()
    assert frozen() is not None  # the collection after a turn skips the frozen
    assert resettle() is not None and frozen() is None
