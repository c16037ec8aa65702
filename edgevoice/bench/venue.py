"""A venue for the quality benchmark: its knowledge, its persona and its questions, read from one directory.

The directory holds ``knowledge.md``, ``knowledge.txt`` or ``knowledge.toml`` (any format the kiosk parses),
``persona.txt`` and ``questions.toml`` in the schema of ``venues/README.md``. The sample museum that ships with the
package is such a venue too (:func:`sample_venue`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from edgevoice import data
from edgevoice.errors import ConfigError

__all__ = [
    "ANSWERABLE",
    "DONT_KNOW",
    "KINDS",
    "SPLITS",
    "Question",
    "Venue",
    "load_venue",
    "parse_questions",
    "sample_venue",
    "venue_dirs",
]

KINDS = ("fact", "paraphrase", "neighbour", "number", "follow_up", "out", "near_miss", "small_talk")
ANSWERABLE = frozenset({"fact", "paraphrase", "neighbour", "number", "follow_up"})
"""Kinds whose right answer states every fact group."""
DONT_KNOW = frozenset({"out", "near_miss"})
"""Kinds whose right answer is an honest "I don't know"."""
SPLITS = ("dev", "test")
KNOWLEDGE_FILES = ("knowledge.md", "knowledge.txt", "knowledge.toml")
SAMPLE = "sample"
"""The name of the sample venue, as ``--venue`` takes it."""


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    facts: tuple[tuple[str, ...], ...] = ()
    """Every group must appear in a right answer, any one spelling of it; empty for out, near_miss, small_talk."""
    kind: str = "fact"
    split: str = "dev"
    after: str = ""
    """follow_up only: the id of the question asked just before, in the same conversation."""
    small_talk: str = ""
    """small_talk only: greeting, thanks, identity, hearing_check or goodbye."""
    entry: str = ""
    """The entry that answers it (its question, or the start of its text), where the facts alone do not tell
    (:mod:`edgevoice.bench.entry_labels`)."""

    @property
    def in_knowledge(self) -> bool:
        return bool(self.facts)


@dataclass(frozen=True)
class Venue:
    name: str
    knowledge: str
    persona: str
    questions: tuple[Question, ...]

    def question(self, id: str) -> Question:
        return next(q for q in self.questions if q.id == id)

    def in_split(self, split: str, per_kind: int = 0) -> tuple[Question, ...]:
        """The questions of ``split`` (``dev``, ``test`` or ``both``), in file order; with ``per_kind``, only the
        first that many of each kind in each split."""
        out: list[Question] = []
        for q in self.questions:
            if split in ("both", q.split):
                taken = sum(o.kind == q.kind and o.split == q.split for o in out)
                if not per_kind or taken < per_kind:
                    out.append(q)
        return tuple(out)


def parse_questions(text: str, source: str) -> tuple[Question, ...]:
    """The ``[[question]]`` tables of a questions file, checked: kinds, splits, ids and ``after`` references."""
    try:
        rows: list[dict[str, Any]] = tomllib.loads(text).get("question", [])
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    out: list[Question] = []
    for i, row in enumerate(rows, 1):
        where = f"{source}: question {i} ({row.get('id', '?')})"
        try:
            q = Question(
                id=str(row["id"]), text=str(row["text"]), kind=str(row["kind"]), split=str(row["split"]),
                facts=tuple(tuple(str(s) for s in group) for group in row.get("facts", ())),
                after=str(row.get("after", "")), small_talk=str(row.get("small_talk", "")),
                entry=str(row.get("entry", "")),
            )  # fmt: skip
        except KeyError as exc:
            raise ConfigError(f"{where}: missing key {exc.args[0]!r}") from exc
        if q.kind not in KINDS:
            raise ConfigError(f"{where}: kind {q.kind!r} is not one of {', '.join(KINDS)}")
        if q.split not in SPLITS:
            raise ConfigError(f"{where}: split {q.split!r} is not dev or test")
        if (q.kind == "follow_up") != bool(q.after):
            raise ConfigError(f"{where}: 'after' is needed by follow_up questions and only by them")
        out.append(q)
    ids = [q.id for q in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: question ids are not unique")
    for q in out:
        if q.after and q.after not in ids:
            raise ConfigError(f"{source}: {q.id} follows {q.after!r}, which is not a question there")
    return tuple(out)


def load_venue(directory: Path | str) -> Venue:
    """The venue in ``directory``; a clear error naming the file when one is missing or malformed."""
    path = Path(directory)
    knowledge = [path / n for n in KNOWLEDGE_FILES if (path / n).is_file()]
    if len(knowledge) != 1:
        raise ConfigError(f"venue {path}: needs exactly one of {', '.join(KNOWLEDGE_FILES)}")
    questions = path / "questions.toml"
    if not questions.is_file():
        raise ConfigError(f"venue {path}: no questions.toml")
    persona = path / "persona.txt"
    return Venue(
        name=path.name,
        knowledge=knowledge[0].read_text(encoding="utf-8"),
        persona=persona.read_text(encoding="utf-8").strip() if persona.is_file() else data.sample_persona(),
        questions=parse_questions(questions.read_text(encoding="utf-8"), str(questions)),
    )


def sample_venue() -> Venue:
    """The sample museum that ships with the package: the default knowledge and persona, its benchmark questions."""
    source = "sample_venue/questions.toml"
    text = resources.files(data).joinpath(source).read_text(encoding="utf-8")
    return Venue(SAMPLE, data.sample_knowledge(), data.sample_persona(), parse_questions(text, source))


def venue_dirs(root: Path | str) -> list[Path]:
    """Every venue under ``root``: the directories with a ``questions.toml``, by name."""
    return sorted(p for p in Path(root).iterdir() if (p / "questions.toml").is_file())
