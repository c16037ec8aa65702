"""The prompt prefix: persona, venue knowledge, speaking rules and a few example turns.

The prefix is identical for every turn, so the language model keeps it in its KV cache: a question costs only its own
tokens. Small models follow rules far better when shown them, hence the example turns.

When the venue's knowledge is too large for the context (see :mod:`edgevoice.kiosk.grounding`), the prefix holds no
facts (``knowledge=None``): each question then brings the few entries retrieved for it (:func:`question_with_facts`),
and the example turns show that shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from edgevoice import data
from edgevoice.events import ChatMessage

_TEXT = data.table("en/prompt.toml")

DONT_KNOW: str = _TEXT["dont_know"]
"""The answer to a question the knowledge does not answer (``edgevoice/data/en/prompt.toml``, as all the prompt's
English text)."""
DONT_KNOW_OPENING: str = _TEXT["dont_know_opening"]
"""The opening of :data:`DONT_KNOW`, which a small model completes with a place of its own."""
DONT_KNOW_BUT: str = _TEXT["dont_know_but"]
"""The refusal of a near miss, said before the answer of the entry the question is about."""
ASK_AGAIN: str = _TEXT["ask_again"]
"""What the gate says instead of :data:`DONT_KNOW` to a question the recognizer was unsure of (asked once)."""
REDIRECT: str = _TEXT["redirect"]
"""The refusal that names a place the knowledge gives (``{place}``), instead of the model's "I don't know"."""
OFF_TOPIC: str = _TEXT["off_topic"]
RULES: str = _TEXT["rules"]
"""The speaking rules with the venue facts in the prompt (``{max_sentences}``, ``{dont_know}`` filled in)."""
RETRIEVED_RULES: str = _TEXT["retrieved_rules"]
"""The speaking rules when each question brings its own facts."""

EXAMPLES: tuple[tuple[str, str], ...] = tuple(
    (e["question"], e["answer"].format(dont_know=DONT_KNOW, off_topic=OFF_TOPIC)) for e in _TEXT["examples"]
)
"""The example turns: (question, answer)."""
EXAMPLE_FACTS: dict[str, tuple[str, ...]] = {e["question"]: tuple(e["facts"]) for e in _TEXT["examples"]}
"""The facts each example question comes with in retrieval mode: the first finds its answer there, the others do
not."""


def system_prompt(persona: str, knowledge: str | None, *, max_sentences: int = 2) -> str:
    """Persona, the venue facts (``None``: they come with each question) and the rules."""
    if knowledge is None:
        rules = RETRIEVED_RULES.format(max_sentences=max_sentences, dont_know=DONT_KNOW)
        return f"{persona.strip()}\n\n{rules}"
    rules = RULES.format(max_sentences=max_sentences, dont_know=DONT_KNOW)
    return f"{persona.strip()}\n\n{_TEXT['facts_heading']}\n{knowledge.strip()}\n\n{rules}"


def question_with_facts(question: str, facts: Sequence[str]) -> str:
    """A visitor's question preceded by the facts retrieved for it (retrieval mode)."""
    listed = "\n".join(facts) if facts else _TEXT["no_facts"]
    return f"{_TEXT['facts_heading']}\n{listed}\n\n{_TEXT['question_heading']} {question}"


def prefix_messages(
    persona: str,
    knowledge: str | None,
    *,
    max_sentences: int = 2,
    facts_per_question: bool = False,
    venue_examples: Sequence[tuple[str, str]] = (),
) -> list[ChatMessage]:
    """The cached prefix: the system prompt followed by the example turns.

    ``knowledge=None``: retrieval mode (no facts in the prefix). ``facts_per_question`` (implied by retrieval mode):
    each question comes with its retrieved facts, and so do the example questions. ``venue_examples``: (question,
    answer) turns from the venue's own knowledge, shown before the "don't know" examples."""
    messages = [ChatMessage("system", system_prompt(persona, knowledge, max_sentences=max_sentences))]
    with_facts = facts_per_question or knowledge is None
    examples = [(q, a, EXAMPLE_FACTS[q]) for q, a in EXAMPLES]
    if venue_examples:  # the venue's own facts, answered as they are written, replace the generic lift example
        examples = [(q, a, (f"{q} {a}",)) for q, a in venue_examples] + examples[1:]
    for question, answer, facts in examples:
        asked = question_with_facts(question, facts) if with_facts else question
        messages += [ChatMessage("user", asked), ChatMessage("assistant", answer)]
    return messages


def conversation(
    prefix: Sequence[ChatMessage], history: Sequence[ChatMessage], user_text: str, *, unsure: bool = False
) -> list[ChatMessage]:
    """The messages for one turn: the cached prefix, the history, then the new question (``unsure``: as the
    recognizer was unsure it heard it, :attr:`ChatMessage.unsure`)."""
    return [*prefix, *history, ChatMessage("user", user_text, unsure=unsure)]
