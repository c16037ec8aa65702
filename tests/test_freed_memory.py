"""Freed memory handed back to the system between turns (glibc's ``malloc_trim``)."""

from __future__ import annotations

import os

import pytest

from edgevoice.bench.idle import rss_mb
from edgevoice.live.memory import release_freed_memory

CHUNK = 64 * 1024
"""Below glibc's mmap threshold (128 KiB at the start): the chunks come from the heap, not from mmaps of their own."""


def test_the_pages_of_memory_freed_inside_the_heap_go_back_to_the_system() -> None:
    if release_freed_memory() is None:
        pytest.skip("not glibc: no malloc_trim")
    chunks = [bytearray(CHUNK) for _ in range(2000)]  # 125 MiB, every page touched (zero-filled)
    kept = chunks[::20]  # every twentieth stays: free() alone can give back only the top of the heap
    del chunks
    before = rss_mb(os.getpid())
    took = release_freed_memory()
    after = rss_mb(os.getpid())
    assert took is not None and 0 <= took < 1.0
    assert before - after > 60, (before, after)  # about 119 MiB were freed inside the heap
    assert len(kept) == 100
