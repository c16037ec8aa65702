"""The appliance's threads carry kernel names that /proc (and so top -H and bench --idle) show."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from edgevoice.live.loop import named
from edgevoice.selftest.cpu import thread_times
from edgevoice.thread_names import NAME_BYTES, name_this_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread kernel names are Linux's")


def _comm(tid: int) -> str:
    return Path(f"/proc/self/task/{tid}/comm").read_text().strip()


def test_a_thread_names_itself_and_only_itself_and_long_names_are_cut() -> None:
    seen: dict[str, object] = {}

    def run() -> None:
        seen["ok"] = name_this_thread("ev-a-very-long-thread-name")
        seen["tid"] = threading.get_native_id()
        seen["comm"] = _comm(threading.get_native_id())

    main_before = _comm(threading.get_native_id())
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen["ok"] is True
    assert seen["comm"] == "ev-a-very-long-thread-name"[:NAME_BYTES]
    assert _comm(threading.get_native_id()) == main_before


def test_the_loop_s_threads_are_named_before_their_work_runs_and_the_bench_sees_the_name() -> None:
    names: list[str] = []
    started, proceed = threading.Event(), threading.Event()

    def work() -> None:
        names.append(_comm(threading.get_native_id()))
        started.set()
        proceed.wait(10)

    thread = threading.Thread(target=named(work, "ev-listener"))
    thread.start()
    try:
        assert started.wait(10)
        assert names == ["ev-listener"]
        assert "ev-listener" in {t.name for t in thread_times(os.getpid()).values()}
    finally:
        proceed.set()
        thread.join()
