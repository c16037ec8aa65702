"""The reply check: whether a sentence of the model's reply keeps to the knowledge (no invented number or words),
only echoes the question, or names only what an entry says. Used by
:class:`~edgevoice.kiosk.grounded_model.GroundedModel` on the replies :class:`~edgevoice.kiosk.grounding.Kiosk`
marks for checking (see :mod:`edgevoice.kiosk.grounding`).

A **value** (a word with a digit: a number, a time, a price, a code; or a name: a capitalised word inside a sentence)
is checked against the *evidence*, the entries retrieved for this question, not the whole knowledge: a value is
spoken only as an entry gives it, in a sentence about what that entry is about. "The admin password is 40 euros."
has its value in the price entry, but "admin" and "password" are not that entry's words: unsupported. A value the
question brought ("is the network now Wi-Fi 4.5?") or the persona holds is no evidence of itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set

from edgevoice import data
from edgevoice.kiosk.answer_types import asked_type, has_type
from edgevoice.kiosk.credentials import SECRET_TERMS
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.number_words import as_digits
from edgevoice.kiosk.retrieval import STOP_WORDS, BM25Index, near, terms
from edgevoice.words import fold, word_spans, words

__all__ = ["REPLY_FILLER", "ReplyCheck", "values"]

_MEASURE = re.compile(r"\d\s*([A-Za-z]+)")
REPLY_FILLER = frozenset(terms(" ".join(data.words("en/reply_filler.txt"))))
"""Words any reply may use without the knowledge having them (``edgevoice/data/en/reply_filler.txt``)."""
_NOT_NAMES = frozenset(data.words("en/not_names.txt"))
_SENTENCE = re.compile(r"(?:[^.!?]|[.!?](?=\S))+[.!?]*")
"""A sentence: up to a full stop, a question or an exclamation mark followed by a space (so "4.5" stays whole)."""
_NUMERIC = re.compile(r"(?<![a-z0-9])[a-z]*\d[a-z0-9]*(?:[.:,]\d+)*")
"""A word with a digit, with the decimals, minutes or thousands after it ("4.5", "5:30", "1,200", "b12")."""
_NUMBER = re.compile(r"^(\d+)(?:[:.]00)?(?:st|nd|rd|th|am|pm|h|s)?$")
"""A number with a suffix that does not change it ("10am" and "10:00" are the 10 of "10 am", "3rd" the 3 of "3")."""
ASKING_WORDS = frozenset(terms(" ".join(data.words("en/asking_words.txt"))))
"""Words a question asks with, naming no subject (``edgevoice/data/en/asking_words.txt``)."""
ABOUT_MISSING_WORDS = 2
"""A question that shares a subject word with an entry is not about it when it names this many others the entry
lacks (one is let through: "Which level is the concert hall on?")."""
ABOUT_UNANCHORED_SIMILARITY = 0.45
"""A question that shares no word with an entry is about it only when at least this close in meaning (a
paraphrase); one that shares a word is about it only when the entry has every other word it names."""
MOVED_WORDS = 2
"""A number is on another subject than the question's when the question names this many subject words that each
entry giving it lacks (one is let through: "a pass for my grandmother?" "Over-65s pay 12 euros.")."""
MEASURE_WORDS = frozenset(terms(" ".join(data.words("en/measure_words.txt"))))
"""Words around a number that say what kind of value it is, not what it is about ("euros", "per", "hour":
``edgevoice/data/en/measure_words.txt``)."""
UNITS = {word: i for i, line in enumerate(data.words("en/units.txt")) for word in fold(line).split()}
"""Each unit's spellings (folded) to the unit's line in ``edgevoice/data/en/units.txt``."""
FOREIGN_SUBJECT_WORDS = 1
"""A number is on another subject than the evidence sentence that gives it when the reply's sentence or its question
names this many subject words the knowledge uses elsewhere and that sentence (with its entry's question) lacks."""
VALUE_STRAY_WORDS = 2
"""A sentence that states a value its question's best entry gives is unsupported when this many of its content words
are neither in the entries that give its values nor in the question (one is let through)."""


def _value(word: str) -> str:
    """A value as it is compared: a number without a suffix that does not change it, any other (a code) as it is."""
    word = re.sub(r"(?<=\d),(?=\d{3})", "", word)
    m = _NUMBER.match(word)
    return m.group(1) if m else word


def _numbers(text: str) -> list[str]:
    """The values with a digit in ``text`` (numbers, times, prices, codes; also written as words: "ten euros" is
    10), as compared."""
    return [_value(m.group(0)) for m in _NUMERIC.finditer(fold(as_digits(text)))]


def values(text: str) -> list[str]:
    """The values ``text`` states, folded, in order: its words with a digit or its numbers in words (numbers, times,
    prices, codes: "4.5", "10am" is "10", "twenty past nine" is "9:20") and its names (capitalised words other than
    a sentence's first, stop words and the capitalised words of ``edgevoice/data/en/not_names.txt``)."""
    out: dict[str, None] = dict.fromkeys(_numbers(text))
    for sentence in _SENTENCE.finditer(text):
        for i, (start, end, word) in enumerate(word_spans(sentence.group(0))):
            written = sentence.group(0)[start:end]
            if i == 0 or not written[0].isupper() or written in _NOT_NAMES or any(c.isdigit() for c in word):
                continue
            word = word.removesuffix("'s")
            if word not in STOP_WORDS and not set(terms(word)) <= REPLY_FILLER:
                out.setdefault(word, None)
    return list(out)


_COUNTED = re.compile(r"(?<![a-z0-9])(\d[a-z0-9]*(?:[.:,]\d+)*)\s+([a-z][a-z'-]*)")
"""A number and the word right after it: what it counts or measures ("40 people", "3 meeting rooms")."""


def _after_numbers(text: str) -> list[tuple[str, str]]:
    """Each number of ``text`` (also in words), as compared, with the folded word right after it."""
    return [(_value(m.group(1)), m.group(2)) for m in _COUNTED.finditer(fold(as_digits(text)))]


def _counted(text: str) -> dict[str, set[str]]:
    """Each number of ``text`` (also in words), as compared, with the search terms of the words it counts (a stop word
    after it, as in "7 for children", counts nothing)."""
    out: dict[str, set[str]] = {}
    for value, word in _after_numbers(text):
        out.setdefault(value, set()).update(terms(word))
    return out


def _miscounted(sentence: str, evidence: Sequence[Entry]) -> list[str]:
    """The numbers of ``sentence`` that count what the evidence counts with another number, where the evidence gives
    the number itself for something else: "3 people" from "three meeting rooms, each for up to 40 people"."""
    given: dict[str, set[str]] = {}
    for entry in evidence:
        for value, counted in _counted(entry.search_text()).items():
            given.setdefault(value, set()).update(counted)
    out = []
    for value, counted in _counted(sentence).items():
        own = given.get(value, set())
        elsewhere = any(counted & other for v, other in given.items() if v != value)
        if counted and own and not counted & own and elsewhere:
            out.append(value)
    return out


_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th)$")


def _stated(text: str) -> set[tuple[str, bool]]:
    """The numbers of ``text`` (also in words), as compared, each with whether it is an ordinal: "the 4th row" gives
    a position, not a count of rows."""
    return {(_value(m.group(0)), bool(_ORDINAL.match(m.group(0)))) for m in _NUMERIC.finditer(fold(as_digits(text)))}


def _measure(text: str, value: str) -> set[int]:
    """The units (:data:`UNITS`, by line) right after ``value`` in ``text``: what it measures there."""
    return {UNITS[word] for number, word in _after_numbers(text) if number == value and word in UNITS}


def _same_measure(said: Set[int], given: Set[int]) -> bool:
    """Whether a value said in the units ``said`` may be the one given in ``given``: either names none, or they
    share one."""
    return not said or not given or bool(said & given)


def _gives(value: str, entry_words: Set[str]) -> bool:
    """Whether an entry with the words and values ``entry_words`` gives ``value`` (a name also as a near
    spelling)."""
    if value in entry_words:
        return True
    return not any(c.isdigit() for c in value) and any(near(value, w) for w in entry_words if not w.isdigit())


class ReplyCheck:
    """The knowledge's words (``index``), the persona's (``persona_terms``) and its names (``persona_names``: the
    kiosk's and the venue's, which a reply may say), against which a reply is checked."""

    def __init__(
        self,
        index: BM25Index,
        persona_terms: Set[str],
        persona_names: Iterable[str] = (),
        entries: Sequence[Entry] = (),
    ) -> None:
        """``entries``: the knowledge, whose entries' questions name the things it is about (:meth:`off_subject`)."""
        self._index = index
        self._topics = frozenset(t for e in entries for t in terms(" ".join((e.question, *e.keywords, *e.asked))))
        self._persona_terms = frozenset(persona_terms)
        self._persona_names = frozenset(w for name in persona_names for w in words(name))
        self._known_terms: dict[str, bool] = {}

    def unsupported(self, reply: str, question: str) -> list[str]:
        """The reply's content words that neither the knowledge, the persona nor the question contains."""
        known = set(terms(question)) | self._persona_terms
        out = []
        for term in dict.fromkeys(terms(reply)):
            if term in known or term in REPLY_FILLER or term in self._index.idf:
                continue
            if not any(near(term, v) for v in self._index.idf):
                out.append(term)
        return out

    def unsupported_values(self, reply: str, evidence: Sequence[Entry], question: str = "") -> list[str]:
        """The values of ``reply`` that no entry of ``evidence`` gives, and, for each sentence whose values they
        give, the words (search terms) that tie the sentence to something else than those entries: a word that names
        a secret (:data:`~edgevoice.kiosk.credentials.SECRET_TERMS`); with the best entry (the first of
        ``evidence``, the one ``question`` was grounded on) among them, :data:`VALUE_STRAY_WORDS` words that neither
        they nor the question have; with neighbours only, any word they lack ("Parking is 20 euros." with the
        day pass entry's price); and a number that counts what the evidence counts with another number
        (:func:`_miscounted`)."""
        texts = [
            (
                e,
                set(words(e.search_text(), hyphens=False))
                | set(words(e.search_text()))
                | set(_numbers(e.search_text())),
            )
            for e in evidence
        ]
        asked = set(terms(question))
        out: list[str] = []
        for sentence in _SENTENCE.findall(reply):
            said = [v for v in values(sentence) if v not in self._persona_names or any(c.isdigit() for c in v)]
            if not said:
                continue
            giving = [e for e, ws in texts if any(_gives(v, ws) for v in said)]
            out += [v for v in said if not any(_gives(v, ws) for _, ws in texts)]
            out += self._moved(said, giving, question)
            out += self.off_subject(sentence, question, evidence)
            out += _miscounted(sentence, evidence)
            own = {t for e in giving for t in terms(e.search_text())}
            stray = [
                t
                for t in dict.fromkeys(terms(sentence))
                if t not in own
                and t not in REPLY_FILLER
                and t not in self._persona_terms
                and not any(c.isdigit() for c in t)
                and not any(near(t, o) for o in own)
            ]
            if set(stray) & SECRET_TERMS:
                out += stray
            elif giving and evidence and giving[0] is evidence[0]:
                if len([t for t in stray if t not in asked]) >= VALUE_STRAY_WORDS:
                    out += stray
            elif stray:
                out += stray
        return list(dict.fromkeys(out))

    def unexplained(self, question: str, entries: Sequence[Entry]) -> tuple[list[str], list[str]]:
        """The subject words of ``question`` (its search terms but reply filler and :data:`ASKING_WORDS`) that
        ``entries`` have (also as a near spelling; an entry's keywords and other ways of asking count), and those
        they lack (the persona's words, the venue's name, are never lacking)."""
        own = {t for e in entries for t in terms(" ".join((e.search_text(), *e.asked)))}
        shared: list[str] = []
        missing: list[str] = []
        for t in dict.fromkeys(terms(question)):
            if t in REPLY_FILLER or t in ASKING_WORDS:
                continue
            if t in own or any(near(t, o) for o in own):
                shared.append(t)
            elif t not in self._persona_terms:  # the venue's name: shared where the entry says it, else neutral
                missing.append(t)
        return shared, missing

    def about(self, question: str, entry: Entry, similarity: float | None) -> bool:
        """Whether ``question`` is about ``entry``, so that the entry's answer may be read out to it: it shares a
        subject word with the entry and names fewer than :data:`ABOUT_MISSING_WORDS` others the entry lacks ("Can I
        scan documents in the copy corner?" is not about the entry on printing in the copy corner), or it shares
        none and is close in meaning (``similarity``, the question's cosine with the entry:
        :data:`ABOUT_UNANCHORED_SIMILARITY`). A question with no subject word at all is about whatever entry the
        matcher found."""
        shared, missing = self.unexplained(question, [entry])
        if shared and any(self._known(t) for t in missing):
            return False  # it names another of the venue's things ("a kayak permit", the entry on the boat permit)
        if not self._gives_asked(question, entry, shared):
            return False  # the price it asks is the entry's price of something else
        if shared or not missing:
            return len(missing) < ABOUT_MISSING_WORDS
        return similarity is not None and similarity >= ABOUT_UNANCHORED_SIMILARITY

    def _gives_asked(self, question: str, entry: Entry, shared: Sequence[str]) -> bool:
        """Whether ``entry`` gives the kind of answer ``question`` asks for (a price, a count, a duration, a time, a
        person: :func:`~edgevoice.kiosk.answer_types.asked_type`) in a sentence that has every subject word of the
        question the entry has (``shared``), with the entry's question: "How much is a boat to the island?" is not
        answered by "The island bus costs 6 euros. A boat takes 40 minutes." A question asking no such kind, or
        whose kind the entry's own question asks, is answered by the entry as a whole."""
        kind = asked_type(question)
        if kind is None or asked_type(entry.question) is kind:
            return True
        topic = self.subject_terms(" ".join((entry.question, *entry.keywords)))
        for unit in _SENTENCE.findall(entry.answer):
            if has_type(unit, kind):
                own = topic | self.subject_terms(unit)
                if all(t in own or any(near(t, o) for o in own) for t in shared if t in self.subject_terms(question)):
                    return True
        return False

    def subject_terms(self, text: str) -> set[str]:
        """The words ``text`` names its subject with: its search terms but reply filler, asking words, measure words,
        the persona's words and numbers."""
        return {
            t
            for t in terms(text)
            if t not in REPLY_FILLER
            and t not in ASKING_WORDS
            and t not in MEASURE_WORDS
            and t not in self._persona_terms
            and not any(c.isdigit() for c in t)
        }

    def _known(self, term: str) -> bool:
        """Whether ``term`` (also as a near spelling) names one of the things the knowledge has entries about (a word
        of an entry's question, keywords or other ways of asking): a visitor's word that names none may be another
        word for one of them, or a verb ("kept"); one that names one is that thing."""
        if term not in self._known_terms:
            self._known_terms[term] = term in self._topics or any(near(term, v) for v in self._topics)
        return self._known_terms[term]

    def _given_in(
        self, value: tuple[str, bool], evidence: Sequence[Entry], measure: Set[int] = frozenset()
    ) -> list[set[str]]:
        """The subject words of each evidence sentence that states ``value`` (an ordinal only as an ordinal; with a
        ``measure``, the units after it in the reply, not with another unit: "25 minutes" gives no "25 euros"), each
        with its entry's question and keywords (the entry's topic)."""
        out = []
        for entry in evidence:
            topic = " ".join((entry.question, *entry.keywords))
            own = self.subject_terms(topic)
            for unit in (*_SENTENCE.findall(entry.answer), topic):
                if value in _stated(unit) and _same_measure(measure, _measure(unit, value[0])):
                    out.append(own | self.subject_terms(unit))
        return out

    def off_subject(self, sentence: str, question: str, evidence: Sequence[Entry]) -> list[str]:
        """The numbers of ``sentence`` that the evidence gives only for another subject: no evidence sentence stating
        the number (an ordinal only as an ordinal) shares a subject word with ``sentence`` when it names one, and
        lacks fewer than :data:`FOREIGN_SUBJECT_WORDS` of the subject words that ``sentence`` and ``question`` name
        and the knowledge uses ("The bike costs 3 euros per hour." from the kayak sentence; "10 euros." to a
        question on one permit from the sentence on another). Numbers no evidence gives are left to the other
        rules."""
        named = self.subject_terms(sentence)
        wanted = named | self.subject_terms(question)
        out = []
        for value in sorted(_stated(sentence)):
            units = self._given_in(value, evidence, _measure(sentence, value[0]))
            if not units:
                if self._given_in(value, evidence):
                    out.append(value[0])  # "25 euros" from "25 minutes": given, but as another kind of value
                elif not value[1] and self._given_in((value[0], True), evidence):
                    out.append(value[0])  # "4 rows" from "the 4th row": a position is no count
                continue

            def fits(unit: set[str]) -> bool:
                def has(t: str) -> bool:
                    return t in unit or any(near(t, u) for u in unit)

                if named and not any(has(t) for t in named):
                    return False  # the sentence names a subject, and none of it is this sentence's
                foreign = [t for t in wanted if not has(t) and self._known(t)]
                return len(foreign) < FOREIGN_SUBJECT_WORDS

            if not any(fits(unit) for unit in units):
                out.append(value[0])
        return out

    def _moved(self, said: Sequence[str], giving: Sequence[Entry], question: str) -> list[str]:
        """The numbers among a sentence's values ``said`` that the evidence gives (the entries ``giving`` them) for
        another subject than the question's: each of those entries that shares a subject word with the question lacks
        :data:`MOVED_WORDS` others it names ("Is the office open on public holidays?" and the office's weekday
        hours). Where none shares a subject word (a paraphrase) the other rules judge it."""
        numbers = [v for v in said if any(c.isdigit() for c in v)]
        if not question or not giving or not numbers:
            return []
        judged = [self.unexplained(question, [entry]) for entry in giving]
        sharing = [missing for shared, missing in judged if shared]
        if not sharing:
            return []  # a paraphrase (or a question about something else): the other rules judge it
        return numbers if all(len(missing) >= MOVED_WORDS for missing in sharing) else []

    def supported(self, reply: str, question: str, evidence: Sequence[Entry]) -> bool:
        """Whether ``reply`` keeps to the knowledge: every value as an entry of ``evidence`` gives it, about what
        that entry is about (:meth:`unsupported_values`), no measure (the word after a number) the knowledge lacks,
        and not two words from elsewhere (a small model's inventions bring words the venue never
        wrote: "founded in 1965", "10 metres"). Numbers count however written ("ten euros" is "10 euros",
        :func:`~edgevoice.kiosk.number_words.as_digits`). The limits were set on the development questions."""
        reply = as_digits(reply)
        if self.unsupported_values(reply, evidence, question):
            return False
        missing = [t for t in self.unsupported(reply, question) if not any(c.isdigit() for c in t)]
        if not missing:
            return True
        measures = {t for m in _MEASURE.finditer(reply) for t in terms(m.group(1))}
        return not any(t in measures for t in missing) and len(missing) < 2

    def claims(self, question: str, evidence: Sequence[Entry]) -> list[str]:
        """The values ``question`` brings that no entry of ``evidence`` gives ("is the network now Wi-Fi 4.5?"): a
        reply that agrees would state them as fact."""
        return [v for v in self.unsupported_values(question, evidence) if v in values(question)]

    def echoes(self, reply: str, question: str) -> bool:
        """Whether ``reply`` says nothing but what ``question`` asked ("Is photography permitted?" "Yes,
        photography is permitted."): it has content words, and each is the question's (a refusal, whose words are
        all filler, is not an echo)."""
        said = set(terms(reply)) - REPLY_FILLER - self._persona_terms
        asked = set(terms(question))
        return bool(said) and all(t in asked or any(near(t, a) for a in asked) for t in said)

    def names_only(self, text: str, source: str) -> bool:
        """Whether ``text`` names something (a content word other than filler) and only what ``source`` says
        ("the front desk" in "Ask at the front desk.")."""
        named = set(terms(text)) - REPLY_FILLER
        return bool(named) and named <= set(terms(source))
