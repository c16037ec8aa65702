"""The review inbox in a real browser: Debian's chromium, headless, against the admin page served by uvicorn on a
loopback port with a real knowledge file and review store behind it. The operator attaches a question to an entry
and marks another rightly refused, pressing the page's buttons."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgevoice.admin.app import create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.admin.server import AdminServer
from edgevoice.review.store import ReviewStore
from tests.admin_fakes import FakeAppliance
from tests.test_admin_browser import DevTools, _free_port, chromium, pytestmark  # noqa: F401 (the browser marks)
from tests.test_admin_inbox import FACTS, entries_of, seed


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FakeAppliance, ReviewStore]]:
    venue = tmp_path / "venue.toml"
    venue.write_text(FACTS)
    appliance = FakeAppliance(venue)
    store = ReviewStore(tmp_path / "review", keep_days=14, max_items=500)
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    listen = f"127.0.0.1:{_free_port()}"
    app = create_app(appliance, runner, hosts=ServedHosts.for_listen(listen), review=store)
    server = AdminServer(app, listen, token=False)
    try:
        yield f"http://{listen}", appliance, store
    finally:
        server.close()
        runner.close()
        store.close()


def test_the_inbox_lists_its_questions(served: tuple[str, FakeAppliance, ReviewStore], tmp_path: Path) -> None:
    url, appliance, store = served
    seed(store, appliance.knowledge_path, "Is there a cash point? Call me on 0612345678")  # type: ignore[arg-type]
    dom = chromium(f"{url}/", tmp_path, "--dump-dom").stdout
    assert 'id="inbox"' in dom and "Is there a cash point? Call me on [number]" in dom and "0612345678" not in dom
    assert "Is there an ATM?" in dom and "Where is the chapel?" in dom and "Rightly refused" in dom


def test_an_operator_attaches_a_question_and_dismisses_another(
    served: tuple[str, FakeAppliance, ReviewStore], tmp_path: Path
) -> None:
    url, appliance, store = served
    venue = appliance.knowledge_path
    assert venue is not None
    cash = seed(store, venue, "Is there a cash point?")
    weather = seed(store, venue, "What's the weather tomorrow?")
    browser = DevTools(tmp_path)
    try:
        browser.load("Page.navigate", url=f"{url}/")
        items = browser.evaluate("[...document.querySelectorAll('#inbox li.item')].map(li => li.id)")
        assert items == [f"inbox-item-{weather}", f"inbox-item-{cash}"]
        width = browser.evaluate("document.getElementById('inbox').getBoundingClientRect().width")
        assert isinstance(width, (int, float)) and width > 1000, "the inbox does not span the page's two columns"
        labelled = "[...document.querySelectorAll('#inbox input:not([type=hidden]), #inbox textarea')]"
        unlabelled = f"{labelled}.filter(e => !e.labels.length && !e.getAttribute('aria-label')).length"
        assert browser.evaluate(unlabelled) == 0, "a field of the inbox has no label"
        checked = f"document.querySelector('#inbox-item-{cash} form.attach input[name=key]:checked').value"
        assert browser.evaluate(checked) == entries_of(venue)[0].key  # the entry ranked first, chosen already
        press = f"document.querySelector('#inbox-item-{cash} form.attach button').click()"
        browser.load("Runtime.evaluate", expression=press)
        message = str(browser.evaluate("document.getElementById('inbox-message').textContent"))
        assert message.startswith("Attached and reloaded") and "2 entries" in message
        assert tomllib.loads(venue.read_text())["qa"][0]["asked"] == ["Is there a cash point?"]
        assert appliance.reloads == 1 and tomllib.loads(appliance.loaded)["qa"][0]["asked"] == [
            "Is there a cash point?"
        ]

        press = f"document.querySelector('#inbox-item-{weather} form[action$=settle] button').click()"
        browser.load("Runtime.evaluate", expression=press)
        assert "rightly refused" in str(browser.evaluate("document.getElementById('inbox-message').textContent"))
        assert browser.evaluate("document.querySelectorAll('#inbox li.item').length") == 0
        assert store.items() == [] and venue.read_text().count("[[qa]]") == 2
    finally:
        browser.close()
