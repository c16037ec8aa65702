"""The review inbox on the admin page: listed, attached to an entry or answered in a new one (the real knowledge file
saved and the kiosk reloaded), marked rightly refused, deleted one by one or all at once; an entry edited meanwhile,
another save meanwhile, the inbox off, the token."""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from edgevoice.admin.app import create_app
from edgevoice.admin.inbox import Inbox
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.converse import Assistant
from edgevoice.kiosk import knowledge_edit
from edgevoice.kiosk.knowledge import Entry, parse_knowledge
from edgevoice.review.store import Ranked, ReviewStore
from tests.admin_fakes import HOSTS, SELFTEST_REPORT, FakeAppliance, fake_assistant, kiosk_config
from tests.fakes import FakeLlm

FACTS = """[[qa]]
question = "Is there an ATM?"
answer = "Yes, an ATM is beside the main entrance."

[[qa]]
question = "Where is the chapel?"
answer = "The chapel is on the ground floor, next to the garden."
"""
TOKEN = "s3cret-token-0123456789"


class KioskAppliance(FakeAppliance):
    """The fake appliance, its reload the real kiosk's (the assistant rebuilt from the knowledge file)."""

    def __init__(self, path: Path, assistant: Assistant) -> None:
        super().__init__(path)
        self.assistant = assistant

    def reload_knowledge(self) -> object:
        self.reloads += 1
        self.loaded = self.knowledge_text()
        return self.assistant.reload_knowledge()


@pytest.fixture
def venue(tmp_path: Path) -> Path:
    path = tmp_path / "venue.toml"
    path.write_text(FACTS)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ReviewStore]:
    store = ReviewStore(tmp_path / "review", keep_days=14, max_items=500)
    yield store
    store.close()


def entries_of(path: Path) -> list[Entry]:
    return parse_knowledge(path.read_text())


def seed(store: ReviewStore, venue: Path, question: str = "Is there a cash point?") -> int:
    atm, chapel = entries_of(venue)[:2]
    kept = store.add(
        question,
        reason="refused",
        verdict="gate",
        reply="I don't know that, please ask at the desk.",
        ranked=[Ranked(atm.key, atm.question), Ranked(chapel.key, chapel.question)],
        margin=None,
    )
    assert kept is not None
    return kept


def inbox_client(appliance: FakeAppliance, review: ReviewStore | None, token: str | None = None) -> TestClient:
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", f"print({SELFTEST_REPORT!r})"])
    app = create_app(appliance, runner, hosts=HOSTS, token=token, review=review)
    return TestClient(app, base_url="http://localhost")


def test_the_inbox_lists_each_question_with_the_entries_ranked_first(venue: Path, store: ReviewStore) -> None:
    item = seed(store, venue)
    listing = inbox_client(FakeAppliance(venue), store).get("/api/review").json()
    assert listing["enabled"] is True
    (shown,) = listing["items"]
    assert shown["id"] == item and shown["question"] == "Is there a cash point?" and shown["reason"] == "refused"
    assert [r["question"] for r in shown["ranked"]] == ["Is there an ATM?", "Where is the chapel?"]
    assert all(r["current"] for r in shown["ranked"])
    page = inbox_client(FakeAppliance(venue), store).get("/").text
    assert 'id="inbox"' in page and "Is there a cash point?" in page and "Rightly refused" in page


def test_attaching_saves_the_file_and_the_reloaded_kiosk_has_the_question(venue: Path, store: ReviewStore) -> None:
    assistant = fake_assistant(kiosk_config(venue, semantic=False), FakeLlm("Yes.", None))  # type: ignore[arg-type]
    appliance = KioskAppliance(venue, assistant)
    item = seed(store, venue)
    atm = entries_of(venue)[0]
    response = inbox_client(appliance, store).post(f"/api/review/{item}/attach", json={"key": atm.key})
    assert response.status_code == 200, response.text
    assert response.json()["ok"] and response.json()["entries"] == 2 and appliance.reloads == 1
    assert tomllib.loads(venue.read_text())["qa"][0]["asked"] == ["Is there a cash point?"]
    assert venue.with_name("venue.toml.bak").read_text() == FACTS
    reloaded = {e.key: e for e in assistant.kiosk.entries}
    assert reloaded[atm.key].asked == ("Is there a cash point?",), "the key stays: asked is not part of it"
    assert store.items() == []


def test_the_form_attaches_to_another_entry_named_by_its_question(venue: Path, store: ReviewStore) -> None:
    appliance = FakeAppliance(venue)
    item = seed(store, venue, "Somewhere quiet to pray?")
    page = inbox_client(appliance, store).post(
        f"/inbox/{item}/attach",
        data={"key": "other", "other": "where is the chapel", "question": "A quiet place to pray?"},
    )
    assert page.status_code == 200 and "Attached and reloaded" in page.text
    assert tomllib.loads(appliance.loaded)["qa"][1]["asked"] == ["A quiet place to pray?"]


def test_a_new_entry_is_written_from_the_question_and_the_answer(venue: Path, store: ReviewStore) -> None:
    appliance = FakeAppliance(venue)
    item = seed(store, venue, "Is there someone who speaks Spanish?")
    response = inbox_client(appliance, store).post(
        f"/api/review/{item}/add", json={"answer": "Yes: ask at the desk for the interpreter service."}
    )
    assert response.status_code == 200, response.text
    added = entries_of(venue)[-1]
    assert added.question == "Is there someone who speaks Spanish?"
    assert added.answer == "Yes: ask at the desk for the interpreter service."
    assert response.json()["entries"] == 3 and appliance.reloads == 1 and store.items() == []
    empty = seed(store, venue, "Is there a cash point?")
    refused = inbox_client(appliance, store).post(f"/api/review/{empty}/add", json={"answer": "  "})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "review_invalid"
    assert len(entries_of(venue)) == 3


def test_an_entry_edited_meanwhile_is_a_clear_refusal(venue: Path, store: ReviewStore) -> None:
    appliance = FakeAppliance(venue)
    item = seed(store, venue)
    venue.write_text(FACTS.replace("beside the main entrance", "in the foyer"))  # the ATM entry, edited
    edited = venue.read_text()
    client = inbox_client(appliance, store)
    assert client.get("/api/review").json()["items"][0]["ranked"][0]["current"] is False
    atm_key = store.items()[0].ranked[0].key
    response = client.post(f"/api/review/{item}/attach", json={"key": atm_key})
    assert response.status_code == 409 and response.json()["error"]["code"] == "knowledge_entry_changed"
    assert venue.read_text() == edited and appliance.reloads == 0
    assert [i.id for i in store.items()] == [item], "the item stays for the operator to attach elsewhere"
    page = client.post(f"/inbox/{item}/attach", data={"key": atm_key})
    assert page.status_code == 409 and 'id="inbox-message"' in page.text and "Not done" in page.text


def test_a_save_meanwhile_is_kept_and_the_attachment_made_on_top(venue: Path, store: ReviewStore) -> None:
    """Two operators at once: another save lands between this action's read and its save; neither is lost."""
    appliance = FakeAppliance(venue)
    item = seed(store, venue)
    atm, chapel = entries_of(venue)
    inbox = Inbox(store, appliance)
    other_done = []
    real_attach = knowledge_edit.attach_question

    def attach_then_another_saves(text: str, key: str, question: str, *, source: str = "knowledge") -> str:
        out = real_attach(text, key, question, source=source)
        if not other_done:  # the other operator's save, after this one read the file
            other_done.append(True)
            venue.write_text(real_attach(venue.read_text(), chapel.key, "Where can I pray?"))
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("edgevoice.admin.inbox.attach_question", attach_then_another_saves)
        saved = inbox.attach(item, atm.key)
    assert saved["ok"]
    qa = tomllib.loads(venue.read_text())["qa"]
    assert qa[0]["asked"] == ["Is there a cash point?"] and qa[1]["asked"] == ["Where can I pray?"]
    assert hashlib.sha256(venue.read_bytes()).hexdigest() == hashlib.sha256(appliance.loaded.encode()).hexdigest()


def test_rightly_refused_delete_and_delete_all(venue: Path, store: ReviewStore) -> None:
    client = inbox_client(FakeAppliance(venue), store)
    settled = seed(store, venue, "What's the weather tomorrow?")
    assert client.post(f"/api/review/{settled}/settle").json() == {"ok": True}
    assert (
        store.add("what's the weather tomorrow", reason="refused", verdict="gate", reply="", ranked=[], margin=None)
        is None
    )
    one, two = seed(store, venue, "Is there a cash point?"), seed(store, venue, "Somewhere to pray?")
    assert client.delete(f"/api/review/{one}").json() == {"ok": True}
    gone = client.delete(f"/api/review/{one}")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "review_gone"
    assert [i["id"] for i in client.get("/api/review").json()["items"]] == [two]
    page = client.post("/inbox/clear")
    assert page.status_code == 200 and "Deleted all: 1 questions" in page.text and store.items() == []
    three = seed(store, venue, "Where can I park?")
    assert client.delete("/api/review").json() == {"ok": True, "deleted": 1} and len(store) == 0
    assert client.post(f"/inbox/{three}/settle").status_code == 404


def test_the_page_forms_settle_and_delete(venue: Path, store: ReviewStore) -> None:
    client = inbox_client(FakeAppliance(venue), store)
    one, two = seed(store, venue, "Is there a cash point?"), seed(store, venue, "What's the weather tomorrow?")
    assert "Marked rightly refused" in client.post(f"/inbox/{two}/settle").text
    assert "Deleted." in client.post(f"/inbox/{one}/delete").text
    assert "Nothing to review" in client.get("/").text


def test_with_the_inbox_off_nothing_is_shown_and_actions_are_refused(venue: Path) -> None:
    client = inbox_client(FakeAppliance(venue), None)
    assert client.get("/api/review").json() == {"enabled": False, "items": []}
    assert 'id="inbox"' not in client.get("/").text
    response = client.post("/api/review/1/settle")
    assert response.status_code == 409 and response.json()["error"]["code"] == "review_off"
    assert client.delete("/api/review").json()["error"]["code"] == "review_off"


def test_the_inbox_asks_for_the_token_and_a_page_of_another_site_is_refused(venue: Path, store: ReviewStore) -> None:
    item = seed(store, venue)
    client = inbox_client(FakeAppliance(venue), store, token=TOKEN)
    assert client.get("/api/review").json()["error"]["code"] == "admin_token_needed"
    assert client.delete("/api/review").status_code == 401 and len(store) == 1
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/api/review", headers=bearer).json()["items"][0]["id"] == item
    cross = client.post(f"/inbox/{item}/delete", headers={**bearer, "Origin": "http://attacker.example"})
    assert cross.status_code == 403 and len(store) == 1


def test_inline_knowledge_cannot_take_an_attachment(store: ReviewStore, venue: Path) -> None:
    item = seed(store, venue)
    response = inbox_client(FakeAppliance(None), store).post(f"/api/review/{item}/attach", json={"key": "0" * 12})
    assert response.status_code == 409 and response.json()["error"]["code"] == "knowledge_not_editable"


def test_a_body_that_is_not_a_json_object_is_refused(venue: Path, store: ReviewStore) -> None:
    item = seed(store, venue)
    client = inbox_client(FakeAppliance(venue), store)
    for body in (b"[1, 2]", b"{not json", b'{"key": 12}'):
        response = client.post(f"/api/review/{item}/attach", content=body)
        assert response.status_code == 422 and response.json()["error"]["code"] == "review_invalid", body
    assert client.post(f"/api/review/{item}/explode").status_code == 404
    assert len(store) == 1 and venue.read_text() == FACTS


@pytest.mark.parametrize(
    ("name", "facts"),
    [
        ("venue.md", "## Money\n\nIs there an ATM? Yes, an ATM is beside the main entrance.\n"),
        ("venue.txt", "Is there an ATM? Yes, an ATM is beside the main entrance.\nIs there a cloakroom? Yes.\n"),
    ],
)
def test_attaching_writes_the_files_own_format(tmp_path: Path, store: ReviewStore, name: str, facts: str) -> None:
    venue = tmp_path / name
    venue.write_text(facts)
    atm = entries_of(venue)[0]
    item = store.add("Is there a cash point?", reason="refused", verdict="gate", reply="", ranked=[], margin=None)
    assert item is not None
    appliance = FakeAppliance(venue)
    response = inbox_client(appliance, store).post(f"/api/review/{item}/attach", json={"key": atm.key})
    assert response.status_code == 200, response.text
    reloaded = parse_knowledge(appliance.loaded)
    assert reloaded[0].key == atm.key and reloaded[0].asked == ("Is there a cash point?",)
    assert venue.read_text().startswith(facts.split("?")[0])  # the rest of the file kept as written


def test_an_editor_opened_before_an_attachment_does_not_write_over_it(venue: Path, store: ReviewStore) -> None:
    """Two operators: one has the editor open, the other attaches a question from the inbox; the first one's save is
    refused (its text is kept in the editor), and a second save, told so, replaces it knowingly."""
    appliance = FakeAppliance(venue)
    client = inbox_client(appliance, store)
    page = client.get("/").text
    base = re.search(r'name="sha256" value="([0-9a-f]{64})"', page)
    assert base is not None and base[1] == hashlib.sha256(FACTS.encode()).hexdigest()
    item = seed(store, venue)
    assert client.post(f"/api/review/{item}/attach", json={"key": entries_of(venue)[0].key}).status_code == 200
    attached = venue.read_text()
    edited = FACTS.replace("next to the garden", "by the garden")
    stale = client.post("/knowledge", data={"text": edited, "sha256": base[1]})
    assert stale.status_code == 409 and "changed meanwhile" in stale.text and "by the garden" in stale.text
    assert venue.read_text() == attached, "the attachment was written over"
    again = re.search(r'name="sha256" value="([0-9a-f]{64})"', stale.text)
    assert again is not None and again[1] == hashlib.sha256(attached.encode()).hexdigest()
    assert client.post("/knowledge", data={"text": edited, "sha256": again[1]}).status_code == 200
    put = client.put("/api/knowledge", content=FACTS.encode(), headers={"If-Match": f'"{base[1]}"'})
    assert put.status_code == 409 and put.json()["error"]["code"] == "knowledge_changed_meanwhile"
    assert client.put("/api/knowledge", content=FACTS.encode()).status_code == 200  # no If-Match: as before
