"""Venue words a recognizer misheard, found by how they sound.

A small recognizer turns a venue's words into ordinary ones that sound alike ("can I borrow Wilcher?" for
"wheelchair", "do you have wife I here?" for "Wi-Fi"). Such a transcript no longer finds its entry, and the visitor
hears "I don't know" to a question the knowledge answers. :class:`SoundLexicon` holds the venue's words (those of the
knowledge and of the visitors' synonyms) as phonemes; for a transcript it proposes the few replacements of one or
two of its unknown words by a venue word that sounds nearly the same. :meth:`edgevoice.kiosk.matching.Matcher.ground`
takes one only when it turns the question into one an entry answers outright, and brings it clearly closer in
meaning to the knowledge: never to send an unrelated question to an entry.

Phonemes come from espeak-ng (the bundled copy the voice already uses), compared by an edit distance in which
vowels and near consonants (voiced and voiceless pairs, nasals, liquids) cost half.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from rapidfuzz.distance import Levenshtein

from edgevoice.kiosk.retrieval import STOP_WORDS, SYNONYMS
from edgevoice.words import word_spans

if TYPE_CHECKING:
    from edgevoice.kiosk.knowledge import Entry

__all__ = ["MEND_SIMILARITY_RISE", "Mend", "Phonemize", "SoundLexicon", "phonetic_distance"]

Phonemize = Callable[[str], str]
"""Text to its phonemes (IPA, stress and length marks left in or not)."""

MEND_DISTANCE = 0.34
"""Largest :func:`phonetic_distance`, as a share of the longer phoneme string, of a replacement."""
MEND_CANDIDATES = 6
"""At most this many replacements, the nearest first, are tried for one transcript."""
MEND_SIMILARITY_RISE = 0.08
"""A question with misheard words replaced (:mod:`edgevoice.kiosk.sounds`) is taken instead of the transcript only
when an entry answers it outright and it is at least this much closer in meaning to the knowledge."""

_MARKS = re.compile("[ˈˌːˑ‿\\s\u0329-]")
_VOWELS = frozenset("aeiouæɑɐɒɔəɚɛɜɝɪʊʌʏyøœɤɯɨʉ")
_NEAR = tuple(frozenset(s) for s in ("pb", "td", "kɡg", "fv", "sz", "ʃʒ", "θð", "mnŋ", "ɹl", "ɾtd"))


@cache
def _cost(a: str, b: str) -> float:
    """The cost of substituting phoneme ``b`` for ``a`` (cached: a question's search asks for the same pairs
    thousands of times)."""
    if a == b:
        return 0.0
    if (a in _VOWELS and b in _VOWELS) or any(a in pair and b in pair for pair in _NEAR):
        return 0.5
    return 1.0


def phonetic_distance(a: str, b: str) -> float:
    """Edit distance between two phoneme strings: substitutions between vowels or near consonants cost 0.5, as
    does inserting or deleting a vowel; anything else 1.

    Written out because its costs depend on the phonemes: rapidfuzz's weighted Levenshtein (the package's other
    edit distances) gives every insertion, deletion and substitution one cost, and summing an exact and a
    class-level distance aligns each separately, which underestimates this one."""
    gaps_b = [0.5 if cb in _VOWELS else 1.0 for cb in b]
    row = [0.0]
    for gap_b in gaps_b:
        row.append(row[-1] + gap_b)
    for ca in a:
        gap_a = 0.5 if ca in _VOWELS else 1.0
        prev, row[0] = row[0], row[0] + gap_a
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + gap_a, row[j - 1] + gaps_b[j - 1], prev + _cost(ca, cb))
    return row[-1]


@dataclass(frozen=True, slots=True)
class Mend:
    """Replace ``text[start:end]`` by ``word``."""

    distance: float
    """:func:`phonetic_distance` as a share of the longer phoneme string."""
    start: int
    end: int
    word: str

    def apply(self, text: str) -> str:
        return text[: self.start] + self.word + text[self.end :]


class SoundLexicon:
    """The venue's words as phonemes, and the replacements that make a transcript sound the same with them."""

    def __init__(
        self,
        words: Iterable[str],
        phonemize: Phonemize,
        *,
        known: Iterable[str] = (),
        max_distance: float = MEND_DISTANCE,
        cache_size: int = 512,
    ) -> None:
        """``words``: the venue's words and phrases (lower-cased here; a phrase replaces as many words as it has).
        ``known``: words never taken for misheard ones (stop words); the venue's own words never are."""
        self._phonemize = phonemize
        self.max_distance = max_distance
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._chosen: OrderedDict[str, str | None] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # the kiosk grounds a question from the prefill's thread and the reply's
        self.words: dict[str, str] = {}
        for word in sorted({w.lower().strip() for w in words if w.strip()}):
            sound = self.sound(word)
            if len(sound) >= 2:
                self.words[word] = sound
        self.known = frozenset(w.lower() for w in known) | {w for phrase in self.words for w in phrase.split()}
        by_span: defaultdict[int, list[tuple[str, str]]] = defaultdict(list)
        for word, sound in sorted(self.words.items(), key=lambda item: len(item[1])):
            for span in (1, 2) if " " not in word else (word.count(" ") + 1,):  # a word may replace two heard ones
                by_span[span].append((word, sound))
        self._by_span = dict(by_span)
        """The venue words that may replace a piece of one or two heard words, with their phonemes, shortest
        first."""
        self._near_start: dict[tuple[int, str], tuple[list[int], list[tuple[str, str]]]] = {}
        """Per span and first heard sound: the lengths and the venue words (shortest first) that start with the
        same or a near sound."""

    @classmethod
    def from_entries(cls, entries: Sequence[Entry], phonemize: Phonemize) -> SoundLexicon:
        """The venue's words to mend misheard ones with: the words of the knowledge and of the visitors' synonyms
        (three letters or more, no stop words or numbers) and the synonyms' phrases."""
        said: set[str] = set()
        for entry in entries:
            for text in (entry.question, entry.answer, *entry.keywords):
                said.update(w for _, _, w in word_spans(text) if w.replace("'", "").replace("-", "").isalpha())
        phrases = {w.lower() for words in SYNONYMS.values() for w in words}
        words = {w for w in said | phrases | {p for phrase in phrases for p in phrase.split()} if len(w) >= 3}
        return cls(words - STOP_WORDS, phonemize, known=said | STOP_WORDS)

    def sound(self, text: str) -> str:
        """The phonemes of ``text``, without stress, length marks or spaces (cached)."""
        with self._lock:
            if (cached := self._cache.get(text)) is not None:
                self._cache.move_to_end(text)
                return cached
        sound = _MARKS.sub("", self._phonemize(text))
        with self._lock:
            self._cache[text] = sound
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return sound

    def candidates(self, text: str, limit: int = MEND_CANDIDATES) -> list[Mend]:
        """Replacements of one word of ``text``, or two neighbours, at least one of them unknown to the venue, by a
        venue word (or a phrase of as many words) that sounds nearly the same and starts with the same or a near
        sound: the nearest ``limit``, nearest first."""
        found = word_spans(text)
        out: list[Mend] = []
        for i in range(len(found)):
            for span in (1, 2):
                piece = found[i : i + span]
                said = [w for _, _, w in piece]
                if len(piece) < span or all(w in self.known for w in said):
                    continue
                sound = self.sound(" ".join(said))
                if len(sound) < 2:
                    continue
                lengths, near = self._starting_near(span, sound[0])
                # too different in length to be near enough: |a - b| > max_distance * max(a, b)
                lo = bisect_left(lengths, len(sound) * (1.0 - self.max_distance) - 1e-9)
                hi = bisect_right(lengths, len(sound) / (1.0 - self.max_distance) + 1e-9)
                for word, venue_sound in near[lo:hi]:
                    if word in said:
                        continue
                    longer = max(len(sound), len(venue_sound))
                    if abs(len(sound) - len(venue_sound)) > self.max_distance * longer:
                        continue
                    # every edit costs at least 0.5: twice the largest distance allowed bounds the plain edit count
                    most = int(2 * self.max_distance * longer + 1e-9)
                    if Levenshtein.distance(sound, venue_sound, score_cutoff=most) > most:
                        continue
                    distance = phonetic_distance(sound, venue_sound) / longer
                    if distance <= self.max_distance:
                        out.append(Mend(distance, piece[0][0], piece[-1][1], word))
        out.sort(key=lambda m: (m.distance, m.start, m.word))
        return out[:limit]

    def _starting_near(self, span: int, first: str) -> tuple[list[int], list[tuple[str, str]]]:
        """The venue words for a piece of ``span`` heard words whose first sound is ``first`` (a word's first sound is
        the one a recognizer most rarely gets wrong), shortest first, with their lengths."""
        key = (span, first)
        if (found := self._near_start.get(key)) is None:
            near = [(w, s) for w, s in self._by_span.get(span, ()) if _cost(first, s[0]) < 1.0]
            found = self._near_start[key] = ([len(s) for _, s in near], near)
        return found

    def first_mend(self, text: str, holds: Callable[[str], bool]) -> str | None:
        """``text`` with the first of its :meth:`candidates`, nearest first, for which ``holds`` (given the mended
        text) is true; None: none holds. The decision is cached per text (``holds`` must depend on the text
        alone)."""
        with self._lock:
            if text in self._chosen:
                self._chosen.move_to_end(text)
                return self._chosen[text]
        chosen = None
        for mend in self.candidates(text):
            if holds(mended := mend.apply(text)):
                chosen = mended
                break
        with self._lock:
            self._chosen[text] = chosen
            while len(self._chosen) > self._cache_size:
                self._chosen.popitem(last=False)
        return chosen
