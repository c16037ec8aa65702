"""Grounded answers: the knowledge compiled into the prompt, a gate against invented answers, retrieval when large.

* **Common case**: the compiled knowledge fits its token budget and sits in the cached system prefix; every turn
  costs only its own tokens.
* **Large knowledge** (over ``knowledge_budget_tokens``): the prefix holds persona, rules and examples only (still
  cached), and each question carries the ``retrieve_entries`` entries BM25 ranks best for it.
* **Reply check**: for a question the knowledge covers only partly (below ``verify_below``), each sentence of the
  model's reply is held back until complete and checked (with what came before it): a number or several words the
  knowledge, the persona and the question never use (an invention) end the reply there, with
  :data:`~edgevoice.kiosk.prompt.DONT_KNOW` if nothing was said yet. Supported sentences are spoken as they come,
  so a checked reply waits for its first sentence, not for its end; fully covered questions stream as usual.
* **Direct answers**: a question one entry answers outright (the entry contains every word of the question and
  no other entry rivals it) gets the entry's answer as the operator wrote it, without the model: right, speakable,
  and with no generation to wait for. The model answers everything else.
* **Grounding gate**: a question whose words the knowledge does not cover (idf-weighted coverage of the best entry
  below ``grounding_threshold``) is answered with :data:`~edgevoice.kiosk.prompt.DONT_KNOW` without running the
  model. A 0.5B model says "I don't know" unreliably; a lexical gate never invents. It cannot tell a near miss
  ("how old is the whale?") from a paraphrase ("which floor is the whale on?"), so its threshold is low (chosen on
  the development questions in ``tests/test_knowledge.py``) and the model declines near misses itself.
* **Semantic matching** (with an :class:`~edgevoice.kiosk.semantic.Embedder`; see :mod:`edgevoice.kiosk.semantic`):
  the meaning of the question is compared with each entry's. A paraphrase that shares no word with its entry ("am I
  allowed to take pictures?") passes the gate when it is close enough in meaning (:data:`SEMANTIC_KNOWN`); a
  question far from every entry in meaning (:data:`SEMANTIC_UNRELATED`) is stopped even if it shares a word; entries
  are ranked by meaning first, words second (retrieval mode and hints). A near miss is as close in meaning to its
  entry as a paraphrase ("how old is the whale skeleton?" and "which floor is the whale on?" both sit near 0.8 from
  "where is the whale skeleton?"), but further from the entry's answer than the entry's own question is: a question
  that is clearly closest to one entry, and at least as close to its answer as that entry's question, gets the
  answer directly (:data:`SEMANTIC_DIRECT_RELEVANCE`); the rest go to the model and its reply check. A question
  that asks for a price, a number, a duration, a time or a person its best entry does not give is a near miss too
  (:mod:`edgevoice.kiosk.answer_types`: "how much is a coffee in the cafe?", "who discovered the wreck?").
* **Misheard venue words** (with semantic matching and a phonemizer; see :mod:`edgevoice.kiosk.sounds`): a
  question no entry answers outright is tried again with one or two of its words replaced by a venue word that
  sounds nearly the same ("how do I reach you by Tran?" as "... by tram?"). The replacement is kept only when it
  makes the question one an entry answers outright, brings it clearly closer in meaning to the knowledge
  (:data:`~edgevoice.kiosk.sounds.MEND_SIMILARITY_RISE`) and brings only words that entry has; the visitor then
  hears that entry's answer.

:class:`~edgevoice.kiosk.grounded_model.GroundedModel` applies this in front of any
:class:`~edgevoice.interfaces.LanguageModel`, so the responder and the live loop need no change: it looks at the
visitor's last message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgevoice.errors import ModelMissingError
from edgevoice.interfaces import LanguageModel
from edgevoice.kiosk.answer_types import lacks_asked
from edgevoice.kiosk.grounded_model import GroundedModel
from edgevoice.kiosk.knowledge import (
    Entry,
    compile_knowledge,
    estimate_tokens,
    example_turns,
    parse_knowledge,
    venue_vocabulary,
)
from edgevoice.kiosk.prompt import prefix_messages, question_with_facts
from edgevoice.kiosk.reply_check import ReplyCheck
from edgevoice.kiosk.retrieval import BM25Index, Match, terms
from edgevoice.kiosk.semantic import Embedder, SemanticIndex
from edgevoice.kiosk.sounds import MEND_SIMILARITY_RISE, Phonemize, SoundLexicon

if TYPE_CHECKING:
    from edgevoice.config import Config

log = logging.getLogger(__name__)

__all__ = ["GroundedModel", "Grounding", "Kiosk"]

DIRECT_COVERAGE = 0.999
"""A direct answer needs an entry that contains every (idf-weighted) word of the question."""
DIRECT_MARGIN = 1.5
"""... and a BM25 score this many times that of any other entry that contains them all."""
DIRECT_QUESTION_SHARE = 0.4
"""... and whose own question (or keywords) holds this idf-weighted share of the question's words."""
SEMANTIC_KNOWN = 0.44
"""A question at least this close in meaning (cosine) to an entry passes the gate whatever its words. On the
development questions, six paraphrases the words miss sit at 0.45-0.81 ("where can I see the big whale bones?"; three
more at 0.25-0.42 stay stopped), questions outside the knowledge that share no word with it at 0.18-0.42, except two
that go to the model (0.60: "how do I get to the airport?", "can I book tickets online?")."""
SEMANTIC_UNRELATED = 0.25
"""A question less close than this to every entry gets "I don't know" even if it shares a word with one ("what
is two plus two?", 0.16). Development questions in the knowledge: 0.32 and above."""
SEMANTIC_DIRECT = 0.45
"""A direct answer by meaning: the entry is at least this close to the question, ..."""
SEMANTIC_DIRECT_MARGIN = 0.15
"""... no other entry comes within this of it, ..."""
SEMANTIC_DIRECT_RELEVANCE = 0.0
"""... and its answer is at least this much closer to the question than to the entry's own question (a paraphrase
asks what the answer says; a near miss asks something else about the same thing: "how old is the whale skeleton?"
is 0.85 from "where is the whale skeleton?" but 0.17 further than it from "in the whale hall on the first floor").
On the development questions this answers 27 questions in the knowledge, all from the right entry, and none outside
it (the closest of those that are close and clear enough: -0.04 and -0.06)."""
SEMANTIC_UNANSWERED = -0.15
"""A question the best entry does not answer outright gets "I don't know" when that entry's answer is further than
this from it, compared with the entry's own question: it asks about the entry's subject something the entry does
not say ("what species is the whale?", -0.25; "does the cafe have a terrace?" stays with the model at -0.06). On
the development questions this stops 12 of the 21 questions outside the knowledge that pass the gate, and 3 in
it (6 before the venue vocabulary learnt "online", "wash hands" and "hungry"), which the 0.5B model got wrong
anyway; the closest it lets through in the knowledge: -0.13."""
RANK_LEXICAL_WEIGHT = 0.25
"""Entries are ranked by similarity plus this times their lexical coverage: meaning first, shared words break
near ties. By meaning the right entry ranks first for 59 of the 67 development questions in the knowledge, by
BM25 for 54."""


@dataclass(frozen=True, slots=True)
class Grounding:
    """What the knowledge says about one question."""

    known: bool
    """False: answer DONT_KNOW without asking the model."""
    coverage: float
    """Best entry's idf-weighted share of the question's terms (1.0 for a question with no content words)."""
    entries: tuple[Entry, ...] = ()
    """The best-ranked entries, best first."""
    direct: str | None = None
    """The answer to speak as it stands, without the model: one entry covers every word of the question and no
    other entry rivals it (see :meth:`Kiosk.ground`)."""
    similarity: float | None = None
    """Semantic matching: the best entry's cosine similarity to the question (None: matched by words only)."""
    question: str = ""
    """The question as grounded: the transcript, or the transcript with misheard venue words replaced (then always
    one an entry answers outright: :attr:`direct` is set)."""


class Kiosk:
    """The venue's knowledge made ready for the language model: entries, index, cached prefix and gate."""

    def __init__(
        self,
        persona: str,
        knowledge: str,
        *,
        max_sentences: int = 2,
        grounding_threshold: float = 0.2,
        knowledge_budget_tokens: int = 1000,
        retrieve_entries: int = 4,
        vocabulary_prompt: bool = True,
        hint_entries: int = 1,
        venue_examples: int = 0,
        verify_below: float = 0.8,
        direct_answers: bool = True,
        embedder: Embedder | None = None,
        phonemize: Phonemize | None = None,
        knowledge_source: str = "knowledge",
        log_transcripts: bool = False,
    ) -> None:
        """``hint_entries``: with the knowledge in the prefix, also put this many retrieved entries before each
        question (0: none). ``direct_answers``: a question one entry answers outright gets that entry's answer,
        spoken as the operator wrote it, without the language model. ``embedder``: a sentence encoder for semantic
        matching (None: the words alone decide); the entries are embedded here, once. ``phonemize``: text to
        phonemes, to mend misheard venue words (used with an ``embedder`` only: the mend needs the meaning's
        consent)."""
        self.hint_entries = hint_entries
        self.direct_answers = direct_answers
        self.verify_below = verify_below
        self.vocabulary_prompt = vocabulary_prompt
        self.entries = parse_knowledge(knowledge, source=knowledge_source)
        self.log_transcripts = log_transcripts
        """Whether the log may hold the visitor's words (``[debug] log_transcripts``)."""
        self.compiled = compile_knowledge(self.entries)
        self.index = BM25Index([e.search_text() for e in self.entries])
        self.grounding_threshold = grounding_threshold
        self.retrieve_entries = retrieve_entries
        self.retrieval = estimate_tokens(self.compiled) > knowledge_budget_tokens
        """True when the knowledge is too large for the prefix and each question brings its own entries."""
        self.prefix = prefix_messages(
            persona,
            None if self.retrieval else self.compiled,
            max_sentences=max_sentences,
            facts_per_question=hint_entries > 0,
            venue_examples=example_turns(self.entries, venue_examples),
        )
        self.vocabulary = venue_vocabulary(self.entries, also=[persona])
        self._persona_terms = frozenset(terms(persona))
        self.check = ReplyCheck(self.index, self._persona_terms)
        """Whether a reply keeps to the knowledge, echoes the question, names only what an entry says."""
        self.semantic: SemanticIndex | None = None
        """The entries' embeddings; None: no embedder (or no entries), the words alone decide."""
        if embedder is not None and self.entries:
            started = time.perf_counter()
            self.semantic = SemanticIndex(
                embedder, self.entries, venue_names=venue_vocabulary([], also=[persona]), cache_size=64
            )
            log.info(
                "semantic matching on: %d knowledge entries embedded in %.0f ms",
                len(self.entries),
                1000 * (time.perf_counter() - started),
            )
        self.sounds: SoundLexicon | None = None
        """The venue's words as phonemes, to mend misheard ones; None: transcripts are taken as heard."""
        if phonemize is not None and self.semantic is not None:
            self.sounds = SoundLexicon.from_entries(self.entries, phonemize)

    @classmethod
    def from_config(cls, config: Config, *, embedder: Embedder | None = None) -> Kiosk:
        """The kiosk the config describes. With ``[kiosk] semantic`` (the default) the embedding model
        (``[models] embed``) is loaded unless ``embedder`` is given; a model that is not installed leaves the words
        alone to decide, with a warning. With ``[kiosk] mend_misheard`` as well, espeak-ng's phonemes mend
        misheard venue words."""
        k = config.kiosk
        if k.semantic and embedder is None:
            embedder = _load_embedder(config)
        elif not k.semantic:
            embedder = None
            log.info("semantic matching off ([kiosk] semantic = false): questions are matched by their words")
        phonemize = _load_phonemizer() if k.mend_misheard and embedder is not None else None
        return cls(
            k.persona,
            config.knowledge_text(),
            max_sentences=k.max_sentences,
            grounding_threshold=k.grounding_threshold,
            knowledge_budget_tokens=k.knowledge_budget_tokens,
            retrieve_entries=k.retrieve_entries,
            vocabulary_prompt=k.vocabulary_prompt,
            hint_entries=k.hint_entries,
            venue_examples=k.venue_examples,
            verify_below=k.verify_below,
            direct_answers=k.direct_answers,
            embedder=embedder,
            phonemize=phonemize,
            knowledge_source=config.knowledge_source(),
            log_transcripts=config.debug.log_transcripts,
        )

    def asr_prompt(self, configured: str = "") -> str:
        """Whisper's initial prompt: the configured one, else (with ``vocabulary_prompt``) the venue's names."""
        if configured or not self.vocabulary_prompt or not self.vocabulary:
            return configured
        return ", ".join(self.vocabulary) + "."

    def ground(self, question: str) -> Grounding:
        """Whether the knowledge covers ``question``, and the entries that best answer it.

        Words of the persona (the venue's name: "is there a cafe in the museum?") neither help nor hurt. A question
        no entry answers outright may come back mended (:attr:`Grounding.question`; see the module's doc)."""
        grounding = self._ground(question)
        if grounding.direct is not None or self.sounds is None or not grounding.entries:
            return grounding
        mended = self.sounds.first_mend(question, lambda text: self._mend_holds(text, question, grounding))
        if mended is None:
            return grounding
        if self.log_transcripts:
            log.info("heard %r, taken as %r", question, mended)
        else:
            log.info("a misheard question was mended by the sound of its words")
        return self._ground(mended)

    def _mend_holds(self, mended: str, heard: str, grounding: Grounding) -> bool:
        """A mend is taken when an entry then answers outright, the question comes clearly closer in meaning to the
        knowledge (:data:`~edgevoice.kiosk.sounds.MEND_SIMILARITY_RISE`) and it brings only words that entry has."""
        tried = self._ground(mended)
        rise = (tried.similarity or 0.0) - (grounding.similarity or 0.0)
        return (
            tried.direct is not None
            and rise >= MEND_SIMILARITY_RISE
            and self._answers_with(tried.direct, mended, heard)
        )

    def _answers_with(self, answer: str, mended: str, heard: str) -> bool:
        """Whether the entry that gives ``answer`` has the words the mend brought (a mend must be about the entry it
        reaches: "Matt still on" taken as "Matt station" reaches the exhibition, which never says "station")."""
        brought = set(terms(mended)) - set(terms(heard))
        return any(e.answer == answer and brought <= set(terms(e.search_text())) for e in self.entries)

    def _ground(self, question: str) -> Grounding:
        """:meth:`ground` of the question as it stands."""
        matches = self.index.search(question, self.retrieve_entries, neutral=self._persona_terms)
        entries = tuple(self.entries[m.index] for m in matches)
        small_talk = self.small_talk(question)
        coverage = 1.0 if small_talk else max((m.coverage for m in matches), default=0.0)
        if self.semantic is None:
            known = small_talk or coverage >= self.grounding_threshold
            direct = None if small_talk else self._direct(question, matches)
            if entries and self._lacks_asked(question, entries[0]):
                known, direct = False, None
            return Grounding(known, coverage, entries, direct, None, question)
        similarity, relevance = self.semantic.similarities(question)
        covered = np.zeros(len(self.entries), dtype=np.float32)
        for m in self.index.search(question, neutral=self._persona_terms):
            covered[m.index] = m.coverage
        order = [int(i) for i in np.argsort(-(similarity + RANK_LEXICAL_WEIGHT * covered), kind="stable")]
        entries = tuple(self.entries[i] for i in order[: self.retrieve_entries])
        best = float(similarity.max())
        if small_talk:
            return Grounding(True, coverage, entries, similarity=best, question=question)
        known = self.grounding_threshold <= 0.0 or best >= SEMANTIC_KNOWN
        known = known or (coverage >= self.grounding_threshold and best >= SEMANTIC_UNRELATED)
        direct = self._direct(question, matches) or self._semantic_direct(order, similarity, relevance)
        if direct is None and self.grounding_threshold > 0.0 and relevance[order[0]] < SEMANTIC_UNANSWERED:
            known = False  # a near miss: about an entry's subject, but not what its answer says
        if self._lacks_asked(question, self.entries[order[0]]):
            known, direct = False, None
        return Grounding(known, coverage, entries, direct if known else None, best, question)

    def small_talk(self, question: str) -> bool:
        """Nothing to look up: no word but stop words and the persona's ("hello", "thank you", "hi Ada")."""
        return not set(terms(question)) - self._persona_terms

    def _lacks_asked(self, question: str, entry: Entry) -> bool:
        """The question asks a price, a number, a duration, a time or a person that its best entry does not give
        (:mod:`edgevoice.kiosk.answer_types`): a near miss, whatever the words and the meaning say. Off with the
        gate."""
        return self.grounding_threshold > 0.0 and lacks_asked(question, entry.answer, entry.question)

    def _said_in(self, question: str, entry: Entry) -> bool:
        """Every word of the question (but the persona's) is in the entry as said: no near spellings."""
        return set(terms(question)) - self._persona_terms <= set(terms(entry.search_text()))

    def _semantic_direct(self, order: Sequence[int], similarity: np.ndarray, relevance: np.ndarray) -> str | None:
        """The answer of the entry closest in meaning, when it is close, no other entry comes near, and its answer
        fits the question at least as well as the question it was written for."""
        if not self.direct_answers or not order or not self.entries[order[0]].question:
            return None
        best = order[0]
        runner_up = max((float(similarity[i]) for i in order[1:]), default=-1.0)
        if similarity[best] < SEMANTIC_DIRECT or similarity[best] - runner_up < SEMANTIC_DIRECT_MARGIN:
            return None
        return self.entries[best].answer if relevance[best] >= SEMANTIC_DIRECT_RELEVANCE else None

    def _direct(self, question: str, matches: Sequence[Match]) -> str | None:
        """The best entry's answer when it contains every word of the question as said (no near spellings), has a
        question of its own that shares the question's main words (so its answer was written as a reply to this
        kind of question, not merely mentions them), and clearly outranks every other entry that covers it all."""
        if not self.direct_answers or not matches or matches[0].coverage < DIRECT_COVERAGE:
            return None
        best = self.entries[matches[0].index]
        if not best.question or not best.answer:
            return None
        if not self._said_in(question, best):
            return None  # covered only through a near spelling ("ships" for "shop")
        asked = set(terms(question)) - self._persona_terms
        weight = {t: self.index.idf.get(t, self.index.unseen_idf) for t in asked}
        own = set(terms(" ".join((best.question, *best.keywords))))
        if sum(w for t, w in weight.items() if t in own) < DIRECT_QUESTION_SHARE * sum(weight.values()):
            return None  # the words are in its answer only ("is there a lift?" and the toilets "next to the lifts")
        rivals = [m for m in matches[1:] if m.coverage >= DIRECT_COVERAGE]
        if rivals and rivals[0].score * DIRECT_MARGIN > matches[0].score:
            return None  # two entries answer it about equally well: let the model choose and phrase
        return best.answer

    def user_turn(self, question: str, grounding: Grounding) -> str:
        """The visitor's message as the model sees it: in retrieval mode, with the retrieved facts before it."""
        if self.retrieval:
            return question_with_facts(question, [e.line() for e in grounding.entries])
        if self.hint_entries:
            return question_with_facts(question, [e.line() for e in grounding.entries[: self.hint_entries]])
        return question

    def grounded(self, llm: LanguageModel) -> GroundedModel:
        return GroundedModel(llm, self)


def _load_embedder(config: Config) -> Embedder | None:
    from edgevoice.engines.factory import load_embedder  # lazy: the factory imports the pipeline, which imports us

    try:
        return load_embedder(config)
    except (ModelMissingError, ImportError) as exc:
        log.warning("semantic matching off (%s): questions are matched by their words only", exc)
        return None


def _load_phonemizer() -> Phonemize | None:
    try:
        from edgevoice.engines.piper_onnx import espeak_phonemes

        return espeak_phonemes()
    except (ImportError, OSError, RuntimeError) as exc:
        log.warning("misheard venue words are not mended (no phonemizer: %s)", exc)
        return None
