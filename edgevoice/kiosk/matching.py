"""The grounding gate: how a question matches the knowledge entries, whether the knowledge covers it, and whether one
entry answers it outright.

* **Grounding gate**: a question whose words the knowledge does not cover (idf-weighted coverage of the best entry
  below ``grounding_threshold``) is answered with :data:`~edgevoice.kiosk.prompt.DONT_KNOW` without running the
  model: a small model says "I don't know" unreliably, a lexical gate never invents. It cannot tell a near miss from
  a paraphrase, so its threshold is low and the model declines near misses itself.
* **Direct answers** (:mod:`edgevoice.kiosk.direct_answers`): a question one entry answers outright (the entry
  contains every word of the question and no other entry rivals it) gets the entry's answer as the operator wrote it,
  without the model.
* **Semantic matching** (with an :class:`~edgevoice.kiosk.semantic.Embedder`): a paraphrase that shares no word with
  its entry passes the gate when it is close enough in meaning (:data:`SEMANTIC_KNOWN`); a question far from every
  entry (:data:`SEMANTIC_UNRELATED`) is stopped even if it shares a word; entries are ranked by meaning first, words
  second. A near miss is as close in meaning to its entry as a paraphrase, but further from the entry's answer than
  the entry's own question is: a question clearly closest to one entry, and at least as close to its answer as that
  entry's question, gets the answer directly (:data:`~edgevoice.kiosk.direct_answers.SEMANTIC_DIRECT_RELEVANCE`). A
  question that asks for a price, a number, a duration, a time or a person its best entry does not give is a near
  miss too (:mod:`edgevoice.kiosk.answer_types`).
* **Other ways of asking** (:attr:`Entry.asked <edgevoice.kiosk.knowledge.Entry.asked>`, from the operator's review
  or the compiled knowledge) count as the entry's own question: by meaning (its closest question decides its
  similarity and is the near-miss reference: :class:`~edgevoice.kiosk.semantic.SemanticIndex`), by words (they join
  its document: :func:`~edgevoice.kiosk.retrieval.document`) and for a direct answer; a question that says one of an
  entry's questions again (:data:`~edgevoice.kiosk.direct_answers.SEMANTIC_SAME`) gets its answer.
* **The learned read-out** (:mod:`edgevoice.kiosk.read_out`): a question the gate lets through and no rule reads
  out gets its best entry's answer when a logistic decision over the ranking's features, fitted on the benchmark
  venues' development halves for this encoder, is confident that entry answers it; otherwise it goes to the model.
* **Misheard venue words** (with semantic matching and a phonemizer; see :mod:`edgevoice.kiosk.sounds`): a question
  no entry answers outright is tried again with one or two words replaced by a venue word that sounds nearly the
  same. The replacement is kept only when an entry then answers it outright, it comes clearly closer in meaning
  (:data:`~edgevoice.kiosk.sounds.MEND_SIMILARITY_RISE`) and it brings only words that entry has.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from edgevoice.kiosk.answer_types import lacks_asked, without_yes_no
from edgevoice.kiosk.background_embedding import CHUNK, EMBED_NOW_TEXTS, BackgroundEmbedding
from edgevoice.kiosk.direct_answers import lexical_direct, said_again, semantic_direct
from edgevoice.kiosk.embedding_cache import EmbeddingCache, EmbeddingStopped, encoder_identity
from edgevoice.kiosk.grounding_types import Grounding
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.read_out import ReadOut, ranking_features
from edgevoice.kiosk.retrieval import BM25Index, Match, document, terms
from edgevoice.kiosk.semantic import Embedder, SemanticIndex
from edgevoice.kiosk.sounds import MEND_SIMILARITY_RISE, Phonemize, SoundLexicon
from edgevoice.kiosk.sounds import Stopped as SoundsStopped

log = logging.getLogger(__name__)

__all__ = ["Matcher"]

SEMANTIC_KNOWN = 0.44
"""A question at least this close in meaning (cosine) to an entry passes the gate whatever its words."""
SEMANTIC_KNOWN_LENIENT = 0.40
"""The same with ``[kiosk] gate = "lenient"``, which has no near-miss rule (:data:`SEMANTIC_UNANSWERED`)."""
SEMANTIC_UNRELATED = 0.25
"""A question less close than this to every entry gets "I don't know" even if it shares a word with one."""
SEMANTIC_UNANSWERED = -0.15
"""A question the best entry does not answer outright gets "I don't know" when that entry's answer is further than
this from it, compared with the entry's own question: it asks about the entry's subject something the entry does
not say."""
RANK_LEXICAL_WEIGHT = 0.25
"""Entries are ranked by similarity plus this times their lexical coverage: meaning first, shared words break
near ties."""
NEAR_MISS_TOLD = 0.55
"""A question the gate stops although its best entry is at least this close in meaning is a near miss: it hears
that entry's answer after the refusal (:meth:`edgevoice.kiosk.grounding.Kiosk.refusal`)."""


def ranking_margin(order: Sequence[int], similarity: np.ndarray, covered: np.ndarray) -> float | None:
    """How far the best entry's ranking score (similarity plus :data:`RANK_LEXICAL_WEIGHT` times its word coverage)
    leads the second's; None with fewer than two entries."""
    if len(order) < 2:
        return None
    score = similarity + RANK_LEXICAL_WEIGHT * covered
    return float(score[order[0]] - score[order[1]])


class _Meaning(NamedTuple):
    """What matching by meaning needs, made together (in the background for a large knowledge)."""

    semantic: SemanticIndex
    read_out: ReadOut | None
    sounds: SoundLexicon | None


def _embed(embedder: Embedder, texts: Sequence[str], go_on: Callable[[], bool] | None) -> np.ndarray:
    """``texts`` embedded :data:`CHUNK` at a time, ``go_on`` asked before each (no embedding cache)."""
    if go_on is None:
        return embedder.embed(texts)
    parts = []
    for start in range(0, len(texts), CHUNK):
        if not go_on():
            raise EmbeddingStopped(f"stopped after {start} of {len(texts)} texts")
        parts.append(embedder.embed(texts[start : start + CHUNK]))
    return np.concatenate(parts)


class Matcher:
    """The knowledge entries indexed by their words (and, given an embedder, by their meaning), and the gate that
    grounds a question in them."""

    def __init__(
        self,
        entries: Sequence[Entry],
        persona_terms: frozenset[str],
        *,
        grounding_threshold: float = 0.2,
        retrieve_entries: int = 4,
        direct_answers: bool = True,
        embedder: Embedder | None = None,
        phonemize: Phonemize | None = None,
        venue_names: Sequence[str] = (),
        log_transcripts: bool = False,
        embedding_cache: Path | None = None,
        read_out: ReadOut | None = None,
        lenient: bool = False,
        embed_now_texts: int = EMBED_NOW_TEXTS,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        """``persona_terms``: words that neither help nor hurt (the venue's name). ``embedder``: a sentence encoder
        for semantic matching (None: the words alone decide); the entries are embedded once, here or in the
        background (``embed_now_texts``). ``phonemize``:
        text to phonemes, to mend misheard venue words (used with an ``embedder`` only: the mend needs the meaning's
        consent). ``venue_names``: replaced by a neutral word before embedding. ``log_transcripts``: whether the log
        may hold the visitor's words (``[debug] log_transcripts``). ``embedding_cache``: a directory to keep the
        entries' embeddings in between starts (:mod:`edgevoice.kiosk.embedding_cache`; None, or an encoder without an
        ``identity``: embedded at every start). ``read_out``: the learned read-out decision
        (:mod:`edgevoice.kiosk.read_out`), used when it was fitted for this ``embedder``. ``lenient``: the language
        model judges near misses (``[kiosk] gate``). ``embed_now_texts``: with more texts than this to embed (not in
        the cache), they are embedded in the background (:mod:`edgevoice.kiosk.background_embedding`), only while
        ``idle()`` (None: at once), and the words alone decide until then."""
        self.entries = list(entries)
        documents = [document(e) for e in self.entries]
        self.index = BM25Index(documents)
        self._terms = [frozenset(terms(d)) for d in documents]
        """Each entry's words as :attr:`index` has them (its asked questions' included)."""
        self.persona_terms = persona_terms
        self.grounding_threshold = grounding_threshold
        self.lenient = lenient
        self.retrieve_entries = retrieve_entries
        self.direct_answers = direct_answers
        self.log_transcripts = log_transcripts
        self.semantic: SemanticIndex | None = None
        """The entries' embeddings; None: no embedder (or no entries), or not embedded yet: the words alone decide."""
        self.read_out: ReadOut | None = None
        """Whether the best entry answers a question the rules left to the model; None: the rules alone decide."""
        self.sounds: SoundLexicon | None = None
        """The venue's words as phonemes, to mend misheard ones; None: transcripts are taken as heard."""
        self.embedding: BackgroundEmbedding[_Meaning] | None = None
        """The entries being embedded in the background; None: embedded before the matcher was ready, or no
        embedder."""
        if embedder is not None and self.entries:
            self._embed_entries(embedder, phonemize, venue_names, embedding_cache, read_out, embed_now_texts, idle)

    def _embed_entries(
        self,
        embedder: Embedder,
        phonemize: Phonemize | None,
        venue_names: Sequence[str],
        embedding_cache: Path | None,
        read_out: ReadOut | None,
        embed_now_texts: int,
        idle: Callable[[], bool] | None,
    ) -> None:
        """Make what matching by meaning needs (:class:`_Meaning`): now when at most ``embed_now_texts`` texts are
        missing from the embedding cache, else in the background (:attr:`embedding`)."""
        identity = encoder_identity(embedder)
        stored = EmbeddingCache(embedding_cache, identity) if embedding_cache and identity else None
        texts = SemanticIndex.texts(self.entries, venue_names)
        missing = stored.missing(texts) if stored is not None else len(set(texts))

        def work(go_on: Callable[[], bool] | None) -> _Meaning:
            if stored is not None:
                vectors = stored.embed(embedder, texts, go_on=go_on, chunk=CHUNK if go_on else None)
            else:
                vectors = _embed(embedder, texts, go_on)
            semantic = SemanticIndex(embedder, self.entries, venue_names=venue_names, cache_size=64, vectors=vectors)
            usable = read_out if read_out is not None and read_out.encoder == identity else None
            if read_out is not None and usable is None:
                log.info("the learned read-out is off: it was fitted for another sentence encoder")
            try:  # in the background, between turns too: the voice phonemizes with the same espeak-ng
                sounds = SoundLexicon.from_entries(self.entries, phonemize, go_on=go_on) if phonemize else None
            except SoundsStopped as exc:
                raise EmbeddingStopped(str(exc)) from exc
            return _Meaning(semantic, usable, sounds)

        where = (
            f"{len(set(texts)) - missing} texts from {stored.path}, {missing} embedded" if stored else "all embedded"
        )
        if missing <= embed_now_texts:
            started = time.perf_counter()
            self._use(work(None))
            log.info(
                "semantic matching on: %d knowledge entries ready in %.0f ms (%s)",
                len(self.entries),
                1000 * (time.perf_counter() - started),
                where,
            )
            return
        log.info(
            "%d knowledge texts to embed, more than %d: embedded in the background while no turn is in progress; "
            "until then questions are matched by their words",
            missing,
            embed_now_texts,
        )

        def done(meaning: _Meaning) -> None:
            self._use(meaning)
            assert self.embedding is not None
            log.info(
                "semantic matching on: %d knowledge entries embedded in the background in %.0f s (%s); questions "
                "are matched by meaning from now on",
                len(self.entries),
                self.embedding.seconds or 0.0,
                where,
            )

        self.embedding = BackgroundEmbedding(work, done, idle=idle)
        self.embedding.start()

    def _use(self, meaning: _Meaning) -> None:
        """Match by meaning from the next question on: the index first, so that what comes with it never runs
        without it."""
        self.semantic = meaning.semantic
        self.read_out = meaning.read_out
        self.sounds = meaning.sounds

    def wait_semantic(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the background embedding; whether the matcher matches by meaning."""
        if self.embedding is not None:
            self.embedding.wait(timeout)
        return self.semantic is not None

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the background embedding, if any (what it embedded is kept in the cache) and join it; False when it
        did not stop within ``timeout`` seconds."""
        return self.embedding.close(timeout) if self.embedding is not None else True

    def ground(self, question: str) -> Grounding:
        """Whether the knowledge covers ``question``, and the entries that best answer it.

        Words of the persona (the venue's name) neither help nor hurt. A question no entry answers outright may come
        back mended (:attr:`Grounding.question`; see the module's doc)."""
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

    def small_talk(self, question: str) -> bool:
        """Nothing to look up: no word but stop words and the persona's ("hello", "thank you", "hi Ada")."""
        return not set(terms(question)) - self.persona_terms

    def _mend_holds(self, mended: str, heard: str, grounding: Grounding) -> bool:
        """A mend is taken when an entry then answers outright, the question comes clearly closer in meaning to the
        knowledge (:data:`~edgevoice.kiosk.sounds.MEND_SIMILARITY_RISE`) and it brings only words that entry has."""
        tried = self._ground(mended)
        rise = (tried.similarity or 0.0) - (grounding.similarity or 0.0)
        return (
            tried.direct is not None and rise >= MEND_SIMILARITY_RISE and self.answers_with(tried.direct, mended, heard)
        )

    def answers_with(self, answer: str, text: str, before: str = "") -> bool:
        """Whether the entry that gives ``answer`` (as written, or without its opening "yes" or "no") has every word
        ``text`` brings beyond ``before``: a mend must be about the entry it reaches, not merely reach one, and so
        must a follow-up grounded with the question before it."""
        brought = set(terms(text)) - set(terms(before))
        return any(
            answer in (e.answer, without_yes_no(e.answer)) and brought <= own
            for e, own in zip(self.entries, self._terms, strict=True)
        )

    def _ground(self, question: str) -> Grounding:
        """:meth:`ground` of the question as it stands."""
        matches = self.index.search(question, self.retrieve_entries, neutral=self.persona_terms)
        entries = tuple(self.entries[m.index] for m in matches)
        small_talk = self.small_talk(question)
        coverage = 1.0 if small_talk else max((m.coverage for m in matches), default=0.0)
        if self.semantic is None:
            known = small_talk or coverage >= self.grounding_threshold
            direct = None if small_talk else self._direct(question, matches)
            if entries and self._lacks_asked(question, entries[0]):
                known, direct = False, None
            return Grounding(known, coverage, entries, direct, None, question)
        order, similarity, relevance, covered = self._ranked(question)
        entries = tuple(self.entries[i] for i in order[: self.retrieve_entries])
        best = float(similarity.max())
        margin = ranking_margin(order, similarity, covered)
        if small_talk:
            return Grounding(True, coverage, entries, similarity=best, question=question, margin=margin)
        known = self.grounding_threshold <= 0.0 or best >= (SEMANTIC_KNOWN_LENIENT if self.lenient else SEMANTIC_KNOWN)
        known = known or (coverage >= self.grounding_threshold and best >= SEMANTIC_UNRELATED)
        direct = self._direct(question, matches)
        if self.direct_answers:
            direct = (
                direct
                or said_again(self.entries, order, similarity, relevance, unanswered=SEMANTIC_UNANSWERED)
                or semantic_direct(self.entries, order, similarity, relevance)
            )
        near_miss = self.grounding_threshold > 0.0 and not self.lenient and relevance[order[0]] < SEMANTIC_UNANSWERED
        if direct is None and near_miss:
            known = False  # a near miss: about an entry's subject, but not what its answer says
        lacks = self._lacks_asked(question, self.entries[order[0]])
        if lacks:
            known, direct = False, None
        if known and direct is None and self.read_out is not None and self.direct_answers:
            top = self.entries[order[0]]
            features = ranking_features(order, similarity, relevance, covered, lacks)
            if top.question and top.answer and self.read_out.reads_out(features):
                direct = top.answer
        return Grounding(known, coverage, entries, direct if known else None, best, question, margin=margin)

    def read_out_features(self, question: str) -> np.ndarray | None:
        """The learned read-out's features of ``question`` (:func:`~edgevoice.kiosk.read_out.ranking_features`), as
        :meth:`ground` computes them; None without semantic matching."""
        if self.semantic is None:
            return None
        order, similarity, relevance, covered = self._ranked(question)
        return ranking_features(
            order, similarity, relevance, covered, self._lacks_asked(question, self.entries[order[0]])
        )

    def _ranked(self, question: str) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
        """The entries ranked for ``question`` by meaning first, shared words breaking near ties (best first), with
        each entry's similarity, relevance and word coverage. Needs semantic matching."""
        assert self.semantic is not None
        similarity, relevance = self.semantic.similarities(question)
        covered = self.index.coverage(question, neutral=self.persona_terms)
        order = [int(i) for i in np.argsort(-(similarity + RANK_LEXICAL_WEIGHT * covered), kind="stable")]
        return order, similarity, relevance, covered

    def _lacks_asked(self, question: str, entry: Entry) -> bool:
        """The question asks a price, a number, a duration, a time or a person that its best entry does not give
        (:mod:`edgevoice.kiosk.answer_types`): a near miss, whatever the words and the meaning say. Off with the
        gate."""
        return self.grounding_threshold > 0.0 and all(
            lacks_asked(question, entry.answer, asked) for asked in (entry.question, *entry.asked)
        )

    def _direct(self, question: str, matches: Sequence[Match]) -> str | None:
        """The direct answer by words (:func:`~edgevoice.kiosk.direct_answers.lexical_direct`), with direct answers
        on."""
        if not self.direct_answers:
            return None
        return lexical_direct(question, matches, self.entries, self.index, self._terms, self.persona_terms)
