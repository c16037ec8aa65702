"""The model path on the real default language model: a checked reply's first clause goes out before the model has
written its sentence, and a reply whose question was prefilled speculatively is the reply without speculation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from edgevoice.config import Config
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.engines.llamacpp import LlamaCppModel
from edgevoice.events import ChatMessage
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.prompt import DONT_KNOW, conversation
from edgevoice.models.configured import resolve
from edgevoice.models.store import ModelStore

CHECKED = (
    "How do I reach you by tram?",
    "Where do the tours leave from?",
    "My child fell and hurt his knee.",
    "What can I see in the whale hall?",
    "Where is the cafe and what does it serve?",
)
"""Questions the sample knowledge covers only partly, whose best entries' answers have
more than one clause. Which of them the model answers in clauses, rather than declines, changes with the prompt's
wording (since the rule that facts are data, the first and third are declined), hence several."""


class Recorded:
    """The real model, its pieces recorded as they are generated."""

    def __init__(self, llm: LlamaCppModel) -> None:
        self.llm = llm
        self.pieces: list[str] = []

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.pieces = []
        for piece in self.llm.stream_reply(messages, max_tokens=max_tokens):
            self.pieces.append(piece)
            yield piece

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        return self.llm.prefill(messages)


@pytest.fixture(scope="module")
def llm(store: ModelStore) -> Iterator[LlamaCppModel]:
    model = LlamaCppModel(resolve(store, "llm", Config().models.llm), n_ctx=2048, threads=2)
    yield model
    model.close()


@pytest.fixture(scope="module")
def kiosk() -> Kiosk:
    return Kiosk(sample_persona(), sample_knowledge(), direct_answers=False, reply_check="clause")


def test_a_checked_replys_first_clause_goes_out_before_its_full_stop(llm: LlamaCppModel, kiosk: Kiosk) -> None:
    llm.prefill(kiosk.prefix)
    early = []
    for question in CHECKED:
        grounding = kiosk.ground(question)
        assert grounding.known and grounding.direct is None
        recorded = Recorded(llm)
        grounded = kiosk.grounded(recorded)  # type: ignore[arg-type]
        out: list[tuple[str, int]] = []  # each piece spoken, with how many pieces the model had given
        for piece in grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=60):
            if piece:
                out.append((piece, len(recorded.pieces)))
        spoken = [p for p, _ in out if p.strip() != DONT_KNOW]  # a refusal follows a first sentence that failed
        said = "".join(spoken)
        generated = "".join(recorded.pieces)
        if grounded.last_verdict in (Verdict.MODEL, Verdict.UNSUPPORTED):
            assert generated.startswith(said), (said, generated)  # the model's own words, in order, none left out
            for n in range(1, len(spoken) + 1):
                assert kiosk.check.supported("".join(spoken[:n]), question, grounding.entries)
        first, given = out[0]
        written = "".join(recorded.pieces[:given])
        if first.rstrip().endswith((",", ";", ":")) and generated.startswith(first):
            # the clause went out before the model wrote the end of its first sentence
            assert not any(mark in written[len(first.rstrip()) :] for mark in ".!?"), (first, written)
            early.append(question)
    assert early, "no checked reply had a clause before its first full stop"


def test_a_reply_prefilled_at_the_pause_is_the_reply_without_speculation(llm: LlamaCppModel, kiosk: Kiosk) -> None:
    # greedy decoding: what the speculative prefill left in the KV cache changes the time to the first token only
    question, partial = "How do I reach you by tram?", "How do I reach you"
    grounded = kiosk.grounded(llm)
    llm.prefill(kiosk.prefix)
    llm.prefill(conversation(kiosk.prefix, [], "Where is the cloakroom?"))  # a cache that shares only the prefix
    plain = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=60))
    # the visitor paused mid-question, whose hint was another entry's
    mid = kiosk.user_turn(partial, kiosk.ground("Where is the cloakroom?"))
    assert llm.prefill(conversation(kiosk.prefix, [], mid)) > 0
    assert grounded.prefill(conversation(kiosk.prefix, [], question)) > 0  # the last pause, the whole question
    speculated = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=60))
    assert speculated == plain and plain.strip()
