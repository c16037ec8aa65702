"""The review inbox end to end: a real ``edgevoice run`` (as in ``tests/test_faults.py``, in the private PulseAudio
room) with ``[review]`` on and its admin page on a loopback port. A question outside the knowledge, spoken, reaches
the inbox (and nothing of it the log); attaching it to an entry over the admin API rewrites the knowledge file and
reloads the kiosk, whose next turn is answered."""

from __future__ import annotations

import json
import stat
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from edgevoice import data
from edgevoice.audio.pulse import PulseServer
from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.review.store import FILE_NAME
from tests.display_stand_in import free_port
from tests.test_faults import appliance, ask, assert_answered

pytestmark = [pytest.mark.models, pytest.mark.audio, pytest.mark.slow]

OUTSIDE = "Who won the football game last night?"
INSIDE = "Where is the whale skeleton?"


@pytest.fixture
def speak(speak: Callable[[str], np.ndarray]) -> Callable[[str], np.ndarray]:
    clips = {question: speak(question) for question in (OUTSIDE, INSIDE)}
    return lambda text: clips[text]


def call(url: str, method: str = "GET", body: object = None) -> dict[str, object]:
    request = urllib.request.Request(
        url, method=method, data=None if body is None else json.dumps(body).encode(), headers={"Accept": "*/*"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(json.loads(response.read()))


def listed(url: str, timeout_s: float = 20.0) -> list[dict[str, object]]:
    """The inbox's items once it has one (its subscriber writes it after the turn's record is out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        items = call(url)["items"]
        assert isinstance(items, list)
        if items or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


def test_a_refused_question_reaches_the_inbox_and_is_attached(  # type: ignore[no-untyped-def]
    pulse: PulseServer, store, speak: Callable[[str], np.ndarray], tmp_path: Path
) -> None:
    venue = tmp_path / "venue.txt"
    venue.write_text(data.sample_knowledge(), encoding="utf-8")
    review = tmp_path / "review"
    port = free_port()
    config = (
        f'[kiosk]\nknowledge_file = "{venue}"\nreply_budget_s = 20.0\n\n'
        f'[admin]\nlisten = "127.0.0.1:{port}"\n\n[review]\nenabled = true\ndir = "{review}"\n'
    )
    with appliance(pulse, store, tmp_path, config=config) as app:
        turn = ask(pulse, app, speak, OUTSIDE)
        url = f"http://127.0.0.1:{port}/api/review"
        items = listed(url)
        assert len(items) == 1, (turn, items, app.stderr_tail())
        (item,) = items
        assert item["question"] == turn["transcript"] and item["reason"] in ("refused", "asked_again"), item
        assert item["reply"] == turn["reply"] and item["ranked"], item
        whale = next(e for e in parse_knowledge(venue.read_text()) if e.question == INSIDE)
        saved = call(f"{url}/{item['id']}/attach", "POST", {"key": whale.key})
        assert saved["ok"] and call(url)["items"] == []
        attached = next(e for e in parse_knowledge(venue.read_text()) if e.key == whale.key)
        assert attached.asked == (turn["transcript"],)
        assert_answered(ask(pulse, app, speak, INSIDE), INSIDE, log=app.stderr_tail())  # the reloaded kiosk answers
        log = app.stderr_tail(200_000)
    assert stat.S_IMODE((review / FILE_NAME).stat().st_mode) == 0o600
    assert "football" not in log.lower(), "the visitor's words reached the log"
