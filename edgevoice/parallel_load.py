"""Independent engines loaded side by side, each on a thread of its own.

The engines' loads are native work (llama.cpp, ONNX Runtime, whisper.cpp read and prepare their weights with the GIL
released), so loading them together takes about as long as the longest one instead of their sum. Every thread is
joined before :func:`load_side_by_side` returns; a failed load closes what the others loaded and raises the first
failure in the order the loads were named, so that the error a start reports does not depend on which thread was
faster."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

__all__ = ["load_side_by_side"]


def load_side_by_side(builders: Mapping[str, Callable[[], object]]) -> tuple[dict[str, object], dict[str, float]]:
    """Run each builder on a thread of its own and wait for all; return what each built and the seconds each took.
    When one raises, whatever the others built is closed (its ``close()``) and the first failure, in ``builders``'
    order, is raised."""
    built: dict[str, object] = {}
    failed: dict[str, BaseException] = {}
    times: dict[str, float] = {}

    def run(name: str, build: Callable[[], object]) -> None:
        t = time.perf_counter()
        try:
            built[name] = build()
        except BaseException as exc:  # handed to the caller's thread below
            failed[name] = exc
        times[name] = time.perf_counter() - t

    threads = [
        threading.Thread(target=run, args=(name, build), name=f"edgevoice-load-{name}")
        for name, build in builders.items()
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    finally:  # a signal in the main thread: the loads still end (they cannot be cut short) and are closed
        for thread in threads:
            thread.join()
        if failed or len(built) < len(builders):
            for engine in built.values():
                getattr(engine, "close", lambda: None)()
    for name in builders:
        if name in failed:
            raise failed[name]
    return built, times
