"""Background work's wait for the appliance to be idle (:func:`edgevoice.priority.wait_idle`), shared by the
background embedding, the knowledge compile, the presynthesis and the model recheck."""

from __future__ import annotations

import threading

from edgevoice.priority import wait_idle


def test_the_wait_goes_on_once_the_appliance_is_idle() -> None:
    answers = iter([False, False, True])  # a turn in progress, then over
    asked: list[bool] = []

    def idle() -> bool:
        asked.append(next(answers))
        return asked[-1]

    assert wait_idle(idle, threading.Event())
    assert asked == [False, False, True]
    assert wait_idle(None, threading.Event())  # no idle test: never busy


def test_a_stop_ends_the_wait_busy_or_not() -> None:
    stop = threading.Event()
    stop.set()
    assert not wait_idle(lambda: False, stop)  # busy: the stop ends the wait at the first look
    assert not wait_idle(lambda: True, stop)
    assert not wait_idle(None, stop)
