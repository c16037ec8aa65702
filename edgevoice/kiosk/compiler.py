"""Other ways of asking each knowledge entry, written by the strongest language model the box has and kept only when
they pass three checks.

Issue 16 showed that the kiosk cannot guess better at question time: a visitor who asks for "a cash point" when the
entry says "ATM", or "somewhere quiet to pray" for the chapel, shares no word with the entry and sits too far from it
in meaning. So when the knowledge is saved, a language model writes out, for each entry, short spoken questions a
visitor might ask that it answers, in other words than the entry's (the prompts: ``edgevoice/data/en/compile.toml``).
Issue 16's try with the 0.5B model and no check wrote near misses ("Who owns the museum shop?"): each question here is
kept only when

* **ranked**: the kiosk's own matcher ranks its entry first, no other entry within :data:`RANK_MARGIN`;
* **judged**: the model, asked yes or no (one token, greedy), says the entry answers it;
* **not a near miss**: the matcher's near-miss rules do not flag it (the answer-type rule: it asks a price, a number,
  a time or a person the entry does not give; the relevance rule: the entry's answer is much further from it than
  the entry's own question).

The model's work (the questions written and their judgement) depends on the entry alone and is cached by the entry's
content (:mod:`edgevoice.kiosk.compiled`); the matcher's checks depend on every entry and are made again, in seconds,
whenever the knowledge changes. The thresholds live in ``edgevoice/data/kiosk/compile.toml``; docs/knowledge.md,
"Compiled ways of asking", says how they were chosen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from edgevoice import data
from edgevoice.events import ChatMessage
from edgevoice.kiosk.answer_types import lacks_asked
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.knowledge_guard import MAX_ENTRY_CHARS
from edgevoice.kiosk.matching import RANK_LEXICAL_WEIGHT, SEMANTIC_UNANSWERED, Matcher
from edgevoice.kiosk.retrieval import terms
from edgevoice.priority import background

__all__ = [
    "Checked",
    "Generated",
    "Generator",
    "GeneratorPaused",
    "LanguageModelGenerator",
    "Stopped",
    "check_questions",
    "generate",
    "judge_messages",
    "parse_questions",
    "prompt_messages",
]

PROMPTS: dict[str, Any] = data.table("en/compile.toml")
LIMITS: dict[str, Any] = data.table("kiosk/compile.toml")
PROMPT_VERSION = int(PROMPTS["version"])
COUNT = int(PROMPTS["count"])
RANK_MARGIN = float(LIMITS["rank_margin"])
"""A kept question ranks its entry first by at least this (similarity plus word coverage, as the matcher ranks)."""
MIN_WORDS = int(LIMITS["min_words"])
MAX_WORDS = int(LIMITS["max_words"])
COMPILE_MODEL = str(LIMITS["model"])
"""The manifest's model that compiles when installed (:func:`edgevoice.app_engines.open_compiler`)."""
GENERATE_TOKENS = int(LIMITS["generate_tokens"])
"""The most tokens the model may write for one entry's questions."""

_NUMBERED = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.):]|Q\d*[.:]|Question\s*\d*[.:])?\s*", re.I)
_QUOTES = "\"'“”‘’`"


class Generator(Protocol):
    """A chat model behind the compile: what it writes, greedy, for ``messages`` (at most ``max_tokens``)."""

    identity: str
    """What names its output for the cache: the model's name and the checksum of its weights (or its server)."""

    def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> str: ...


class _Streams(Protocol):
    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]: ...


class GeneratorPaused(Exception):
    """The generator stopped writing because a turn began (its ``busy()`` said so): the entry is written again."""


class LanguageModelGenerator:
    """A :class:`~edgevoice.interfaces.LanguageModel` (opened greedy, temperature 0) as a :class:`Generator`;
    ``busy()``, asked between two small steps of the prompt's prefill (:func:`edgevoice.priority.background`) and at
    every token, stops it (:class:`GeneratorPaused`): a turn that begins waits one step."""

    def __init__(self, llm: _Streams, identity: str, *, busy: Callable[[], bool] | None = None) -> None:
        self.llm, self.identity, self.busy = llm, identity, busy

    def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> str:
        prefill = getattr(self.llm, "prefill", None)
        if prefill is not None and self.busy is not None:  # the prompt in small steps, each a chance to stop
            with background(self.busy):
                prefill(messages)
        if self.busy is not None and self.busy():
            raise GeneratorPaused("a turn began")
        pieces = []
        stream = self.llm.stream_reply(messages, max_tokens=max_tokens)
        try:
            for piece in stream:
                if self.busy is not None and self.busy():
                    raise GeneratorPaused("a turn began")
                pieces.append(piece)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return "".join(pieces)

    def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()


def _fact(entry: Entry) -> str:
    return entry.line()[:MAX_ENTRY_CHARS]


def prompt_messages(entry: Entry, count: int = COUNT) -> list[ChatMessage]:
    """The messages that ask the model for ``count`` ways of asking ``entry``."""
    user = str(PROMPTS["generate_user"]).format(fact=_fact(entry), count=count)
    return [ChatMessage("system", str(PROMPTS["generate_system"])), ChatMessage("user", user)]


def judge_messages(entry: Entry, question: str) -> list[ChatMessage]:
    """The messages that ask the model whether ``entry`` answers ``question`` (yes or no)."""
    user = str(PROMPTS["judge_user"]).format(fact=_fact(entry), question=question)
    return [ChatMessage("system", str(PROMPTS["judge_system"])), ChatMessage("user", user)]


def parse_questions(text: str, entry: Entry, count: int = COUNT) -> list[str]:
    """The questions in the model's reply: one a line, numbering, bullets and quotes dropped, each ending in "?",
    between :data:`MIN_WORDS` and :data:`MAX_WORDS` words, none twice (case and punctuation aside), none the entry's
    own question, at most ``count``. Lines that are no question (a heading, "Sure, here are...") are left out."""
    seen = {_norm(entry.question)} | {_norm(a) for a in entry.asked}
    out: list[str] = []
    for line in text.splitlines():
        line = _NUMBERED.sub("", line, count=1).strip().strip(_QUOTES).strip()
        if "?" not in line:
            continue
        line = line[: line.index("?") + 1].strip(_QUOTES).strip()
        if any(ord(c) < 32 for c in line) or not MIN_WORDS <= len(line.split()) <= MAX_WORDS:
            continue
        if not any(c.isalpha() for c in line) or _norm(line) in seen:
            continue
        seen.add(_norm(line))
        out.append(line[0].upper() + line[1:])
        if len(out) >= count:
            break
    return out


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass(frozen=True)
class Generated:
    """What the model wrote for one entry: its questions and, for each, whether it judged the entry answers it."""

    questions: tuple[str, ...]
    judged: tuple[bool, ...]


class Stopped(Exception):
    """``go_on`` said stop between two model calls."""


def generate(
    generator: Generator, entry: Entry, count: int = COUNT, *, go_on: Callable[[], bool] | None = None
) -> Generated:
    """Ask ``generator`` for ``count`` ways of asking ``entry``, then for its yes or no on each; ``go_on`` is asked
    before each call (False raises :class:`Stopped`)."""

    def call(messages: list[ChatMessage], max_tokens: int) -> str:
        if go_on is not None and not go_on():
            raise Stopped(f"stopped while compiling entry {entry.key}")
        return generator.complete(messages, max_tokens=max_tokens)

    questions = parse_questions(call(prompt_messages(entry, count), GENERATE_TOKENS), entry, count)
    yes = str(PROMPTS["judge_yes"]).lower()
    judged = tuple(call(judge_messages(entry, q), 1).strip().lower().startswith(yes) for q in questions)
    return Generated(tuple(questions), judged)


@dataclass
class Checked:
    """The verdicts on an entry's written questions: kept, and each rejected one with the first check it failed
    ("judged", "near miss", "ranked")."""

    kept: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


CheckNames = ("judged", "near miss", "ranked")


def check_questions(
    matcher: Matcher,
    entry_index: int,
    generated: Generated,
    *,
    checks: Sequence[str] = CheckNames,
    margin: float = RANK_MARGIN,
) -> Checked:
    """Which of ``generated`` (written for ``matcher.entries[entry_index]``) pass ``checks``, with the kiosk's own
    matcher (it must match by meaning: :attr:`Matcher.semantic`)."""
    entry = matcher.entries[entry_index]
    out = Checked()
    for question, judged in zip(generated.questions, generated.judged, strict=True):
        failed = _first_failed(matcher, entry_index, entry, question, judged, checks, margin)
        if failed is None:
            out.kept.append(question)
        else:
            out.rejected.append((question, failed))
    return out


def _first_failed(
    matcher: Matcher,
    index: int,
    entry: Entry,
    question: str,
    judged: bool,
    checks: Sequence[str],
    margin: float,
) -> str | None:
    if "judged" in checks and not judged:
        return "judged"
    if "near miss" in checks and lacks_asked(question, entry.answer, entry.question):
        return "near miss"
    if matcher.semantic is None:
        return "ranked" if "ranked" in checks or "near miss" in checks else None
    order, similarity, relevance, covered = matcher._ranked(question)
    if "ranked" in checks:
        score = similarity + RANK_LEXICAL_WEIGHT * covered
        others = [float(score[i]) for i in order if i != index]
        if order[0] != index or float(score[index]) - max(others, default=-1.0) < margin:
            return "ranked"
    if "near miss" in checks and relevance[index] < SEMANTIC_UNANSWERED:
        return "near miss"
    return None


def new_words(question: str, entry: Entry) -> bool:
    """Whether ``question`` brings a word its entry does not have (for the measurements: the "no shared word"
    paraphrases the compile is for)."""
    return bool(set(terms(question)) - set(terms(entry.search_text())))


Progress = Callable[[int, int], None]
