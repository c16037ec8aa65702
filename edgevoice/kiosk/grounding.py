"""The kiosk: the venue's knowledge made ready for a small language model, so that it answers from the facts or says
it does not know.

* **Common case**: the compiled knowledge fits its token budget and sits in the cached system prefix; every turn
  costs only its own tokens.
* **Large knowledge** (over ``knowledge_budget_tokens``): the prefix holds persona, rules and examples only (still
  cached), and each question carries the ``retrieve_entries`` entries BM25 ranks best for it.
* **Grounding** (:mod:`edgevoice.kiosk.matching`): a gate answers a question the knowledge does not cover with
  :data:`~edgevoice.kiosk.prompt.DONT_KNOW` and a question one entry answers outright with that entry's answer,
  both without the model.
* **Secrets**: a question for a password, a code or a secret is covered only by an entry that answers that very
  question (:mod:`edgevoice.kiosk.credentials`); a persona sentence that names a secret and a knowledge sentence that
  addresses the assistant (:mod:`edgevoice.kiosk.instructions`) are left out at load, with a warning.
* **Small talk** (:mod:`edgevoice.kiosk.small_talk`): greetings, thanks, "can you hear me?", "who are you?" get a
  short reply in the persona from the small-talk phrases, without the model (which declines them); with an encoder,
  rewordings no pattern holds are found by meaning, against the entries' own.
* **Reply check** (:mod:`edgevoice.kiosk.reply_check`): each clause (or, with ``reply_check = "sentence"``, each
  sentence) of every reply of the model is held back until complete and checked (with what came before it), however
  well the knowledge covers its question: a value (a number, also in words, a time, a code, a name) that no entry
  retrieved for the question gives, in a sentence about what that entry is about, or several words the knowledge,
  the persona and the question never use (an invention) end the reply there, with
  :data:`~edgevoice.kiosk.prompt.DONT_KNOW` if nothing was said yet. Supported parts are spoken as they come, so a
  reply waits for its first clause, not for its end.

:class:`~edgevoice.kiosk.grounded_model.GroundedModel` applies this in front of any
:class:`~edgevoice.interfaces.LanguageModel`, so the responder and the live loop need no change: it looks at the
visitor's last message. The sentence encoder and the phonemizer are given to the kiosk, never loaded by it
(:func:`edgevoice.app.build_kiosk` loads them from the config).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgevoice.interfaces import LanguageModel
from edgevoice.kiosk.answer_types import without_yes_no
from edgevoice.kiosk.background_embedding import EMBED_NOW_TEXTS
from edgevoice.kiosk.credentials import answers_secret, asks_secret, persona_without_secrets
from edgevoice.kiosk.embedding_cache import stored_embed
from edgevoice.kiosk.follow_up import follows_up
from edgevoice.kiosk.grounded_model import GroundedModel
from edgevoice.kiosk.grounding_types import Grounding
from edgevoice.kiosk.instructions import without_instructions
from edgevoice.kiosk.knowledge import (
    Entry,
    compile_knowledge,
    estimate_tokens,
    example_turns,
    parse_knowledge,
    venue_vocabulary,
    with_asked,
)
from edgevoice.kiosk.matching import NEAR_MISS_TOLD, Matcher
from edgevoice.kiosk.prompt import DONT_KNOW, DONT_KNOW_BUT, prefix_messages, question_with_facts
from edgevoice.kiosk.read_out import ReadOut
from edgevoice.kiosk.reply_check import ReplyCheck
from edgevoice.kiosk.retrieval import terms
from edgevoice.kiosk.semantic import Embedder, SemanticIndex
from edgevoice.kiosk.small_talk import Floats, SmallTalk
from edgevoice.kiosk.sounds import Phonemize, SoundLexicon
from edgevoice.paths import default_cache_dir
from edgevoice.words import words

if TYPE_CHECKING:
    from edgevoice.config import Config

log = logging.getLogger(__name__)

__all__ = ["GROUNDED_KEPT", "Kiosk"]

GROUNDED_KEPT = 32
"""The groundings of this many recent questions are kept (a speculative question is grounded twice)."""


class Kiosk:
    """The venue's knowledge made ready for the language model: entries, cached prefix, the gate that grounds each
    question (:class:`~edgevoice.kiosk.matching.Matcher`) and the check of the replies."""

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
        reply_check: str = "clause",
        direct_answers: bool = True,
        embedder: Embedder | None = None,
        phonemize: Phonemize | None = None,
        knowledge_source: str = "knowledge",
        log_transcripts: bool = False,
        embedding_cache: Path | None = None,
        small_talk_file: str = "",
        learned_read_out: bool = True,
        gate: str = "strict",
        embed_now_texts: int = EMBED_NOW_TEXTS,
        idle: Callable[[], bool] | None = None,
        asked: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``hint_entries``: with the knowledge in the prefix, also put this many retrieved entries before each question
        (0: none). ``direct_answers``: a question one entry answers outright gets that entry's answer, spoken as the
        operator wrote it, without the language model. ``embedder``: a sentence encoder for semantic matching (None: the
        words alone decide); the entries are embedded once, here or in the background (``embed_now_texts``).
        ``phonemize``: text to phonemes, to mend misheard venue words (used with an ``embedder`` only: the mend needs
        the meaning's consent). ``embedding_cache``: a directory where the entries' embeddings are kept between starts
        (None: they are embedded at every start; :mod:`edgevoice.kiosk.embedding_cache`). ``small_talk_file``: the
        small-talk phrases (empty: the packaged ones). ``learned_read_out``: with the encoder it was fitted for, the
        packaged read-out decision (:mod:`edgevoice.kiosk.read_out`) reads out the best entry of a question the rules
        left to the model. ``gate``: "lenient" leaves near misses to the language model (``[kiosk] gate``).
        ``embed_now_texts``: more texts than this to embed are embedded in the background, while ``idle()`` (None: at
        once), and questions are matched by their words until then (:meth:`wait_semantic`; :meth:`close` stops it).
        ``asked``: more ways of asking entries, by :attr:`Entry.key <edgevoice.kiosk.knowledge.Entry.key>` (a
        compiled knowledge's, a review's not yet saved), added to their :attr:`~edgevoice.kiosk.knowledge.Entry.asked`;
        a key no entry has is left out."""
        self.hint_entries = hint_entries
        self.reply_check = reply_check
        """What of a reply is checked and spoken as a whole: "clause" or "sentence"."""
        self.vocabulary_prompt = vocabulary_prompt
        self.embedder, self.phonemize = embedder, phonemize
        """Kept for a kiosk rebuilt from new knowledge (:meth:`edgevoice.converse.Assistant.reload_knowledge`)."""
        persona = persona_without_secrets(persona)
        self.entries = without_instructions(
            parse_knowledge(knowledge, source=knowledge_source), knowledge, source=knowledge_source
        )
        self.source_entries = self.entries
        """The entries as the knowledge writes them (without ``asked``)."""
        if asked:
            self.entries = with_asked(self.entries, asked)
        self._acting = frozenset(" ".join(words(q)) for e in self.entries if e.action for q in (e.question, *e.asked))
        """The questions, as words, of the entries that declare an action: asked word for word, they are no small
        talk ("I need help" takes the staff call, docs/actions.md)."""
        self.log_transcripts = log_transcripts
        """Whether the log may hold the visitor's words (``[debug] log_transcripts``)."""
        self.compiled = compile_knowledge(self.entries)
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
        persona_names = venue_vocabulary([], also=[persona])
        self.matcher = Matcher(
            self.entries,
            frozenset(terms(persona)),
            grounding_threshold=grounding_threshold,
            retrieve_entries=retrieve_entries,
            direct_answers=direct_answers,
            embedder=embedder,
            phonemize=phonemize,
            venue_names=persona_names,
            log_transcripts=log_transcripts,
            embedding_cache=embedding_cache,
            read_out=ReadOut.packaged() if learned_read_out and embedder is not None else None,
            lenient=gate == "lenient",
            embed_now_texts=embed_now_texts,
            idle=idle,
        )
        """Grounds each question in the entries (by words, meaning and sound)."""
        self.check = ReplyCheck(self.matcher.index, self.matcher.persona_terms, persona_names, self.entries)
        """Whether a reply keeps to the knowledge, echoes the question, names only what an entry says."""
        self._grounded: OrderedDict[tuple[str, bool], Grounding] = OrderedDict()
        """Recent groundings, by question and whether they were by meaning (the background embedding may end)."""
        self._grounded_lock = threading.Lock()
        self.embedder = embedder
        self.chat = SmallTalk.load(persona, small_talk_file, embed=stored_embed(embedder, embedding_cache))
        """Greetings, thanks, "who are you?" and the like, answered in the persona without the model."""

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        embedder: Embedder | None = None,
        phonemize: Phonemize | None = None,
        idle: Callable[[], bool] | None = None,
        asked: Mapping[str, Sequence[str]] | None = None,
    ) -> Kiosk:
        """The kiosk the config describes, with the given sentence encoder and phonemizer (loaded from the config by
        :func:`edgevoice.app.build_kiosk`); ``[kiosk] semantic = false`` leaves out the encoder,
        ``mend_misheard = false`` the phonemizer. ``idle``: when a large knowledge may be embedded in the
        background. ``asked``: more ways of asking entries, by key (:class:`Kiosk`)."""
        k = config.kiosk
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
            reply_check=k.reply_check,
            direct_answers=k.direct_answers,
            embedder=embedder if k.semantic else None,
            phonemize=phonemize if k.mend_misheard else None,
            knowledge_source=config.knowledge_source(),
            log_transcripts=config.debug.log_transcripts,
            embedding_cache=default_cache_dir() / "embeddings",
            small_talk_file=k.small_talk_file,
            gate=k.gate,
            idle=idle,
            asked=asked,
        )

    def wait_semantic(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for a background embedding to end; whether questions are now matched
        by meaning."""
        return self.matcher.wait_semantic(timeout)

    def close(self, timeout: float = 5.0) -> bool:
        """Stop a background embedding (what it embedded is kept in the embedding cache) and join it; False when it
        did not stop within ``timeout`` seconds. The kiosk goes on answering, by words where it had no meaning."""
        return self.matcher.close(timeout)

    @property
    def grounding_threshold(self) -> float:
        return self.matcher.grounding_threshold

    @property
    def semantic(self) -> SemanticIndex | None:
        """The entries' embeddings; None: no embedder (or no entries), the words alone decide."""
        return self.matcher.semantic

    @property
    def sounds(self) -> SoundLexicon | None:
        """The venue's words as phonemes, to mend misheard ones; None: transcripts are taken as heard."""
        return self.matcher.sounds

    def asr_prompt(self, configured: str = "") -> str:
        """Whisper's initial prompt: the configured one, else (with ``vocabulary_prompt``) the venue's names."""
        if configured or not self.vocabulary_prompt or not self.vocabulary:
            return configured
        return ", ".join(self.vocabulary) + "."

    def ground(self, question: str) -> Grounding:
        """Whether the knowledge covers ``question``, and the entries that best answer it
        (:meth:`edgevoice.kiosk.matching.Matcher.ground`). A question for a secret is covered only by the entries that
        answer that very question (:mod:`edgevoice.kiosk.credentials`), and they alone are its evidence. A direct answer
        to a question that brings a value no entry gives loses its opening "yes" or "no". Kept for the last few
        questions: the speculative prefill grounds a transcript at the pause, and the reply grounds the same one again
        at the commit. Small talk comes back with its reply (:attr:`Grounding.small_talk`) and nothing looked up."""
        key = (question, self.semantic is not None)
        with self._grounded_lock:
            if (found := self._grounded.get(key)) is not None:
                self._grounded.move_to_end(key)
                return found
        grounding = self._ground(question)
        with self._grounded_lock:
            self._grounded[key] = grounding
            while len(self._grounded) > GROUNDED_KEPT:
                self._grounded.popitem(last=False)
        return grounding

    def ground_follow_up(self, question: str, previous: str | None) -> Grounding:
        """:meth:`ground` for ``question`` asked right after ``previous`` (the visitor's last question, None when
        there was none). A follow-up (:func:`~edgevoice.kiosk.follow_up.follows_up`: "And on Sundays?", "What about
        children?") is grounded together with the previous question too, and the pair is taken when it finds an answer
        to read out that the question alone does not, and that answer's entry has every word the follow-up adds: the
        previous question names the subject, and a follow-up that asks about something else must not have that
        subject's answer read out."""
        alone = self.ground(question)
        if not previous or alone.small_talk is not None or alone.direct is not None or not follows_up(question):
            return alone
        joined = self.ground(f"{previous} {question}")
        if joined.small_talk is not None or joined.direct is None:
            return alone
        return joined if self.matcher.answers_with(joined.direct, question) else alone

    def refusal(self, grounding: Grounding) -> str:
        """What the visitor hears for a question the knowledge does not answer (``grounding.known`` is false): the
        refusal and, for a near miss (its best entry close in meaning, :data:`NEAR_MISS_TOLD`: about that entry's
        subject, asking what it does not say), what that entry does say: :data:`DONT_KNOW_BUT`, then the entry's
        answer without its opening "yes" or "no". Never with direct answers off, nor for a question that asks for
        a secret."""
        best = grounding.entries[0] if grounding.entries else None
        near = grounding.similarity is not None and grounding.similarity >= NEAR_MISS_TOLD
        if not near or best is None or not best.answer or not self.matcher.direct_answers:
            return DONT_KNOW
        if asks_secret(grounding.question):  # an entry near a secret is no answer to tell (kiosk/credentials.py)
            return DONT_KNOW
        return f"{DONT_KNOW_BUT} {without_yes_no(best.answer)}"  # what it says, not a "yes" to the question

    def _meaning(self, question: str) -> tuple[Floats | None, float]:
        """The question's vector and its cosine with the closest entry, for small talk by meaning (None and -1 when
        the phrases have no examples or there is no encoder)."""
        if not self.chat.by_meaning:
            return None, -1.0
        if self.semantic is not None:
            similarity, _ = self.semantic.similarities(question)  # kept: the matcher asks the same next
            return self.semantic.embed_question(question), float(similarity.max())
        if self.embedder is not None:
            return self.embedder.embed([question])[0], -1.0
        return None, -1.0

    def _ground(self, question: str) -> Grounding:
        reply = (
            None if " ".join(words(question)) in self._acting else self.chat.reply(question, *self._meaning(question))
        )
        if reply is not None:
            return Grounding(True, 1.0, small_talk=reply, question=question)
        grounding = self.matcher.ground(question)
        if grounding.direct is not None:
            entry = self._answering(grounding.direct, grounding.entries)
            if entry is None or not self.about(grounding, entry):  # a wrong entry is never read out: the model
                # answers, its reply checked; a misheard word mended for that read-out is put back (a mend stands
                # only on an entry answering the mended question outright)
                grounding = replace(grounding, direct=None, question=question)
            else:
                grounding = replace(grounding, direct_entry=entry)
        if grounding.direct is not None and self.check.claims(grounding.question, grounding.entries):
            # "is the network now Wi-Fi 4.5?": the entry's "Yes, ..." would agree with what no entry says
            grounding = replace(grounding, direct=without_yes_no(grounding.direct))
        if not grounding.known or not asks_secret(grounding.question):
            return grounding
        neutral = self.matcher.persona_terms
        answering = [e for e in grounding.entries if answers_secret(grounding.question, e, neutral)]
        if not answering:
            return replace(grounding, known=False, direct=None, direct_entry=None)
        direct = grounding.direct if any(e.answer == grounding.direct for e in answering) else None
        entry = grounding.direct_entry if direct is not None else None
        return replace(grounding, entries=tuple(answering), direct=direct, direct_entry=entry)

    def about(self, grounding: Grounding, entry: Entry) -> bool:
        """Whether the question of ``grounding`` is about ``entry``, so that the entry's answer may be read out to
        it (directly, or instead of a reply that echoes the question): by its words, or where it shares none with the
        entry, by its meaning (:meth:`edgevoice.kiosk.reply_check.ReplyCheck.about`)."""
        similarity = None
        if self.semantic is not None:
            index = next((i for i, e in enumerate(self.entries) if e is entry), None)
            if index is not None:
                similarity = float(self.semantic.similarities(grounding.question)[0][index])
        return self.check.about(grounding.question, entry, similarity)

    def _answering(self, answer: str, ranked: tuple[Entry, ...]) -> Entry | None:
        """The entry whose answer ``answer`` is (as written, or without its opening "yes" or "no"), the ranked ones
        first."""
        return next(
            (e for e in (*ranked, *self.entries) if answer in (e.answer, without_yes_no(e.answer))),
            None,
        )

    def small_talk(self, question: str) -> bool:
        """Nothing to look up: small talk of a known kind ("hello, can you hear me?"), or no word but stop words and
        the persona's ("hi Ada")."""
        return self.chat.kind_of(question, *self._meaning(question)) is not None or self.matcher.small_talk(question)

    def user_turn(self, question: str, grounding: Grounding) -> str:
        """The visitor's message as the model sees it: in retrieval mode, with the retrieved facts before it."""
        if self.retrieval:
            return question_with_facts(question, [e.line() for e in grounding.entries])
        if self.hint_entries:
            return question_with_facts(question, [e.line() for e in grounding.entries[: self.hint_entries]])
        return question

    def grounded(self, llm: LanguageModel) -> GroundedModel:
        """``llm`` behind this kiosk's grounding."""
        return GroundedModel(llm, self)
