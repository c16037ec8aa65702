"""The durable outbox and its delivery (docs/actions.md) against a real webhook receiver on loopback: signed
bodies with their ids, a receiver that answers 500, is slow or is down for an hour, a restart in the middle of a
delivery (a real process killed), a wall clock that jumps, a backlog that fills, and the admin page's view."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from edgevoice.act.delivery import Delivery, JournalSink, backoff_s
from edgevoice.act.outbox import FILE_NAME, Outbox
from edgevoice.act.service import Notifications
from edgevoice.act.webhook import WebhookSink
from tests.admin_fakes import FakeAppliance, admin_client
from tests.notify_receiver import SECRET, Receiver

START = 1_800_000_000.0


class Clocks:
    """The wall and monotonic clocks, moved by the test: :meth:`advance` moves both, :meth:`jump` the wall alone."""

    def __init__(self) -> None:
        self.w, self.m = START, 100.0

    def wall(self) -> float:
        return self.w

    def monotonic(self) -> float:
        return self.m

    def advance(self, s: float) -> None:
        self.w += s
        self.m += s

    def jump(self, s: float) -> None:
        self.w += s


@pytest.fixture
def receiver():  # type: ignore[no-untyped-def]
    r = Receiver()
    yield r
    r.release.set()
    r.down()


def notifications(
    tmp_path: Path,
    url: str,
    clocks: Clocks,
    *,
    max_age_s: float = 6 * 3600,
    max_pending: int = 100,
    timeout_s: float = 5.0,
) -> Notifications:
    outbox = Outbox(tmp_path / "outbox", max_pending=max_pending)
    sinks = {"webhook": WebhookSink(url, SECRET, timeout_s=timeout_s, wall=clocks.wall)}
    delivery = Delivery(outbox, sinks, max_age_s=max_age_s, retry_max_s=300, clocks=clocks, rand=lambda: 0.5)
    return Notifications(outbox, delivery, "desk-1")


def test_a_notification_is_delivered_signed_with_its_id_and_leaves_the_outbox(
    tmp_path: Path, receiver: Receiver
) -> None:
    clocks = Clocks()
    n = notifications(tmp_path, receiver.url, clocks)
    message_id = n.queue("staff_call", "asked", entry="I need help?", turn_id=3)
    assert n.outbox.summary()["pending"] == 1
    assert n.delivery.run_once() == 1
    (got,) = receiver.requests
    assert got["id"] == message_id and got["signed"]
    assert got["body"] == {
        "id": message_id,
        "kiosk": "desk-1",
        "action": "staff_call",
        "reason": "asked",
        "entry": "I need help?",
        "turn": 3,
        "at": "2027-01-15T08:00:00+00:00",
    }
    assert n.outbox.summary()["pending"] == 0 and n.outbox.summary()["delivered"] == 1
    assert stat.S_IMODE((tmp_path / "outbox" / FILE_NAME).stat().st_mode) == 0o600
    n.close()


def test_a_500_is_tried_again_after_a_back_off_with_the_same_id(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    n = notifications(tmp_path, receiver.url, clocks)
    n.queue("show_map", "asked", entry="", turn_id=1)
    receiver.status = 500
    assert n.delivery.run_once() == 0
    (row,) = n.outbox.summary()["pending_rows"]  # type: ignore[misc]
    assert row["attempts"] == 1 and row["error"] == "HTTP 500"
    assert n.delivery.run_once() == 0 and len(receiver.requests) == 1  # not due yet: 0.75 s of back-off
    receiver.status = 200
    clocks.advance(1.0)
    assert n.delivery.run_once() == 1
    assert receiver.ids()[0] == receiver.ids()[1]
    n.close()


def test_a_receiver_down_for_an_hour_gets_everything_after(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    receiver.down()
    n = notifications(tmp_path, receiver.url, clocks)
    ids = [n.queue("staff_call", "asked", entry="", turn_id=i) for i in range(3)]
    for _ in range(3600 // 30):  # a pass every 30 s for an hour
        n.delivery.run_once()
        clocks.advance(30)
    summary = n.outbox.summary()
    assert summary["pending"] == 3 and summary["failed"] == 0
    rows = summary["pending_rows"]
    # backed off to a try every few minutes, not one each of the 120 passes: 1, 2, 4 ... s, then 300 s at most
    assert all(10 <= r["attempts"] <= 30 for r in rows)  # type: ignore[index,union-attr]
    back = Receiver()
    n.delivery.sinks["webhook"] = WebhookSink(back.url, SECRET, timeout_s=5, wall=clocks.wall)
    clocks.advance(300)
    assert n.delivery.run_once() == 3
    assert sorted(back.ids()) == sorted(ids)
    back.down()
    n.close()


def test_a_notification_older_than_the_max_age_is_marked_failed(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    receiver.status = 503
    n = notifications(tmp_path, receiver.url, clocks, max_age_s=1800)
    n.queue("staff_call", "not_understood", entry="", turn_id=1)
    for _ in range(70):
        n.delivery.run_once()
        clocks.advance(30)
    summary = n.outbox.summary()
    assert summary["pending"] == 0 and summary["failed"] == 1
    assert summary["failed_rows"][0]["error"].startswith("expired")  # type: ignore[index]
    n.close()


def test_a_slow_receiver_times_out_and_the_retry_repeats_the_id(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    receiver.hold.set()
    n = notifications(tmp_path, receiver.url, clocks, timeout_s=0.5)
    n.queue("staff_call", "asked", entry="", turn_id=1)
    assert n.delivery.run_once() == 0  # the receiver got it, but answered too late
    assert n.outbox.summary()["pending_rows"][0]["error"].startswith("no answer")  # type: ignore[index]
    receiver.hold.clear()
    receiver.release.set()
    clocks.advance(2)
    assert n.delivery.run_once() == 1
    assert len(receiver.ids()) == 2 and len(set(receiver.ids())) == 1  # a duplicate, with the same id
    n.close()


def test_a_4xx_refuses_the_notification_for_good(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    receiver.status = 401
    n = notifications(tmp_path, receiver.url, clocks)
    n.queue("staff_call", "asked", entry="", turn_id=1)
    n.delivery.run_once()
    summary = n.outbox.summary()
    assert summary["pending"] == 0 and summary["failed_rows"][0]["error"] == "HTTP 401"  # type: ignore[index]
    n.close()


def test_a_wall_clock_jump_neither_expires_nor_holds_back(tmp_path: Path, receiver: Receiver) -> None:
    clocks = Clocks()
    receiver.status = 500
    n = notifications(tmp_path, receiver.url, clocks, max_age_s=3600)
    n.queue("staff_call", "asked", entry="", turn_id=1)
    n.delivery.run_once()  # failed once: due again in 0.75 s
    clocks.jump(-86400)  # NTP sets the clock back a day
    clocks.advance(1)
    receiver.status = 200
    assert n.delivery.run_once() == 1  # not held back a day
    n.queue("staff_call", "asked", entry="", turn_id=2)
    receiver.status = 500
    n.delivery.run_once()
    clocks.jump(2 * 86400)  # and forward two days: the message is one second old, not two days
    clocks.advance(1)
    receiver.status = 200
    assert n.delivery.run_once() == 1
    assert n.outbox.summary()["failed"] == 0
    n.close()


def test_a_full_backlog_marks_the_oldest_failed_and_says_how_many(tmp_path: Path, receiver: Receiver) -> None:
    n = notifications(tmp_path, receiver.url, Clocks(), max_pending=10)
    for i in range(12):
        n.outbox.add(f"m{i}", "staff_call", {"id": f"m{i}"}, ["webhook"], START + i)
    summary = n.outbox.summary()
    assert summary["pending"] == 10 and summary["failed"] == 2
    assert {r["id"] for r in summary["failed_rows"]} == {"m0", "m1"}  # type: ignore[union-attr,index]
    assert all(r["error"] == "backlog full" for r in summary["failed_rows"])  # type: ignore[union-attr,index]
    n.close()


_KILLED_MID_DELIVERY = """
import sys
from pathlib import Path
from edgevoice.act.delivery import Delivery
from edgevoice.act.outbox import Outbox
from edgevoice.act.service import Notifications
from edgevoice.act.webhook import WebhookSink
outbox = Outbox(Path(sys.argv[1]), max_pending=100)
sinks = {"webhook": WebhookSink(sys.argv[2], sys.argv[3].encode(), timeout_s=30, wall=lambda: 1.8e9)}
n = Notifications(outbox, Delivery(outbox, sinks, max_age_s=3600, retry_max_s=60), "desk-1")
print(n.queue("staff_call", "asked", entry="", turn_id=1), flush=True)
n.delivery.run_once()  # the receiver holds the request: the process is killed here
"""


def test_a_restart_in_the_middle_of_a_delivery_loses_nothing(tmp_path: Path, receiver: Receiver) -> None:
    receiver.hold.set()
    directory = tmp_path / "outbox"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED_MID_DELIVERY), str(directory), receiver.url, SECRET.decode()],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    message_id = process.stdout.readline().strip()
    assert receiver.wait_for(1), "the delivery never reached the receiver"
    process.send_signal(signal.SIGKILL)  # a power cut, in the middle of the delivery
    process.wait(10)
    process.stdout.close()
    receiver.hold.clear()
    receiver.release.set()
    clocks = Clocks()
    outbox = Outbox(directory, max_pending=100)  # the next start
    assert outbox.summary()["pending"] == 1
    delivery = Delivery(
        outbox,
        {"webhook": WebhookSink(receiver.url, SECRET, timeout_s=5, wall=clocks.wall)},
        max_age_s=10 * 86400 * 365,
        retry_max_s=60,
        clocks=clocks,
    )
    assert delivery.run_once() == 1
    assert receiver.ids() == [message_id, message_id]  # sent twice, with one id: the receiver dedupes
    assert outbox.summary()["pending"] == 0
    delivery.close()
    outbox.close()


def test_the_delivery_thread_delivers_what_is_queued_and_stops(tmp_path: Path, receiver: Receiver) -> None:
    outbox = Outbox(tmp_path / "outbox", max_pending=100)
    lines: list[str] = []
    logged = threading.Event()

    def journal(line: str) -> None:
        lines.append(line)
        logged.set()

    webhook = WebhookSink(receiver.url, SECRET, timeout_s=5, wall=lambda: START)
    delivery = Delivery(outbox, {"webhook": webhook, "journal": JournalSink(journal)}, max_age_s=3600, retry_max_s=60)
    n = Notifications(outbox, delivery, "desk-1")
    n.delivery.start()
    message_id = n.queue("staff_call", "asked", entry="I need help?", turn_id=1)
    assert receiver.wait_for(1) and logged.wait(10)
    n.close()
    assert receiver.ids() == [message_id]
    assert lines == [f"action staff_call: notification {message_id}"]  # the journal: no visitor's words


def test_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    assert [backoff_s(a, 300, lambda: 1.0) for a in range(0, 11)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert backoff_s(3, 300, lambda: 0.0) == 4.0  # at least half the ceiling


def test_the_admin_api_shows_the_outbox_behind_its_token(tmp_path: Path, receiver: Receiver) -> None:
    n = notifications(tmp_path, receiver.url, Clocks())
    receiver.status = 500
    n.queue("staff_call", "asked", entry="", turn_id=1)
    n.delivery.run_once()
    from starlette.testclient import TestClient

    from edgevoice.admin.app import create_app
    from edgevoice.admin.selftest_runner import SelftestRunner
    from tests.admin_fakes import HOSTS, SELFTEST_REPORT  # noqa: F401

    runner = SelftestRunner(lambda folder: [sys.executable, "-c", "print(1)"])
    app = create_app(FakeAppliance(None), runner, hosts=HOSTS, token="t0ken", outbox=n.outbox.summary)
    client = TestClient(app, base_url="http://localhost")
    assert client.get("/api/outbox").status_code == 401
    answer = client.get("/api/outbox", headers={"Authorization": "Bearer t0ken"}).json()
    assert answer["pending"] == 1 and answer["pending_rows"][0]["error"] == "HTTP 500"
    page = client.get("/", headers={"Authorization": "Bearer t0ken"}).text
    assert "1 waiting, 0 failed" in page
    assert admin_client(FakeAppliance(None)).get("/api/outbox").status_code == 404  # none configured
    n.close()
