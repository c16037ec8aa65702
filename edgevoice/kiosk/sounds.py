"""Venue words a recognizer misheard, found by how they sound.

A small recognizer turns a venue's words into ordinary ones that sound alike ("can I borrow Wilcher?" for
"wheelchair", "do you have wife I here?" for "Wi-Fi"). Such a transcript no longer finds its entry, and the visitor
hears "I don't know" to a question the knowledge answers. :class:`SoundLexicon` holds the venue's words (those of the
knowledge and of the visitors' synonyms) as phonemes; for a transcript it proposes the few replacements of one or
two of its unknown words by a venue word that sounds nearly the same. :meth:`edgevoice.kiosk.matching.Matcher.ground`
takes one only when it turns the question into one an entry answers outright, and brings it clearly closer in
meaning to the knowledge: never to send an unrelated question to an entry.

Phonemes come from espeak-ng (the bundled copy the voice already uses), compared by an edit distance in which
vowels and near consonants (voiced and voiceless pairs, nasals, liquids) cost half. A large knowledge file has
thousands of words: they are phonemized a few hundred to a call (as a list, one clause each), and a transcript's
words are compared only with the venue words of a near first sound and a near length, whose plain edit distance
(a lower bound of twice this one) leaves them in reach.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rapidfuzz.distance import Levenshtein

from edgevoice.kiosk.retrieval import STOP_WORDS, SYNONYMS
from edgevoice.words import word_spans

if TYPE_CHECKING:
    from edgevoice.kiosk.knowledge import Entry

__all__ = ["MEND_SIMILARITY_RISE", "Mend", "Phonemize", "SoundLexicon", "Stopped", "phonetic_distance"]

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


_CLASS: dict[str, int] = {}
"""Phoneme: its class (the vowels, or a group of near consonants); two phonemes of one class are near."""
for _number, _group in enumerate((_VOWELS, *_NEAR)):
    _joined = {_CLASS[p] for p in _group if p in _CLASS}  # groups that share a phoneme are one class (td, ɾtd)
    for _p in _group:
        _CLASS[_p] = min(_joined, default=_number)


def _cost(a: str, b: str) -> float:
    if a == b:
        return 0.0
    near = _CLASS.get(a)
    return 0.5 if near is not None and near == _CLASS.get(b) else 1.0


def phonetic_distance(a: str, b: str) -> float:
    """Edit distance between two phoneme strings: substitutions between vowels or near consonants cost 0.5, as
    does inserting or deleting a vowel; anything else 1.

    Written out because its costs depend on the phonemes: rapidfuzz's weighted Levenshtein (the package's other
    edit distances) gives every insertion, deletion and substitution one cost, and summing an exact and a
    class-level distance aligns each separately, which underestimates this one."""
    classes_b = [_CLASS.get(cb, -1) for cb in b]
    row = [0.0]
    for cb in b:
        row.append(row[-1] + (0.5 if cb in _VOWELS else 1.0))
    for ca in a:
        gap_a = 0.5 if ca in _VOWELS else 1.0
        class_a = _CLASS.get(ca, -2)
        prev, row[0] = row[0], row[0] + gap_a
        for j, cb in enumerate(b, 1):
            gap_b = 0.5 if cb in _VOWELS else 1.0
            substitute = 0.0 if ca == cb else 0.5 if class_a == classes_b[j - 1] else 1.0
            prev, row[j] = row[j], min(row[j] + gap_a, row[j - 1] + gap_b, prev + substitute)
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


class Stopped(Exception):
    """A lexicon's construction stopped by its ``go_on``."""


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
        go_on: Callable[[], bool] | None = None,
    ) -> None:
        """``words``: the venue's words and phrases (lower-cased here; a phrase replaces as many words as it has).
        ``known``: words never taken for misheard ones (stop words); the venue's own words never are. ``go_on``:
        asked before each call to the phonemizer while the words are phonemized (it may wait; False stops the
        construction with :class:`Stopped`), for a lexicon made in the background beside the voice, which
        phonemizes with the same espeak-ng."""
        self._phonemize = phonemize
        self.max_distance = max_distance
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._chosen: OrderedDict[str, str | None] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # the kiosk grounds a question from the prefill's thread and the reply's
        self.words: dict[str, str] = {}
        for word, sound in self._sounds(sorted({w.lower().strip() for w in words if w.strip()}), go_on=go_on):
            if len(sound) >= 2:
                self.words[word] = sound
        self._by_first: dict[str, tuple[list[int], list[tuple[str, str]]]] = {}
        """First phoneme: the venue words that start with it, by length (the lengths, and word and sound)."""
        for word, sound in sorted(self.words.items(), key=lambda item: len(item[1])):
            lengths, group = self._by_first.setdefault(sound[0], ([], []))
            lengths.append(len(sound))
            group.append((word, sound))
        self.known = frozenset(w.lower() for w in known) | {w for phrase in self.words for w in phrase.split()}

    @classmethod
    def from_entries(
        cls, entries: Sequence[Entry], phonemize: Phonemize, *, go_on: Callable[[], bool] | None = None
    ) -> SoundLexicon:
        """The venue's words to mend misheard ones with: the words of the knowledge and of the visitors' synonyms
        (three letters or more, no stop words or numbers) and the synonyms' phrases."""
        said: set[str] = set()
        for entry in entries:
            for text in (entry.question, entry.answer, *entry.keywords):
                said.update(w for _, _, w in word_spans(text) if w.replace("'", "").replace("-", "").isalpha())
        phrases = {w.lower() for words in SYNONYMS.values() for w in words}
        words = {w for w in said | phrases | {p for phrase in phrases for p in phrase.split()} if len(w) >= 3}
        return cls(words - STOP_WORDS, phonemize, known=said | STOP_WORDS, go_on=go_on)

    def _sounds(
        self, words: Sequence[str], chunk: int = 200, go_on: Callable[[], bool] | None = None
    ) -> list[tuple[str, str]]:
        """Each word with its :meth:`sound`, phonemized ``chunk`` words to a call: espeak-ng reads ``a, b, c`` as
        one clause per word (its voice is set once per call, which costs more than a word). A chunk whose clauses do
        not come back one per word is phonemized word by word."""
        out: list[tuple[str, str]] = []
        for start in range(0, len(words), chunk):
            if go_on is not None and not go_on():
                raise Stopped(f"phonemized {start} of {len(words)} words")
            part = words[start : start + chunk]
            sounds = [_MARKS.sub("", s) for s in self._phonemize(", ".join(part)).split(",")]
            if len(sounds) != len(part) or not all(sounds):
                sounds = [self.sound(w) for w in part]
            out.extend(zip(part, sounds, strict=True))
        return out

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
                for word, venue_sound in self._within_reach(sound):
                    if word in said or (" " in word and word.count(" ") + 1 != span):
                        continue
                    distance = phonetic_distance(sound, venue_sound) / max(len(sound), len(venue_sound))
                    if distance <= self.max_distance:
                        out.append(Mend(distance, piece[0][0], piece[-1][1], word))
        out.sort(key=lambda m: (m.distance, m.start, m.word))
        return out[:limit]

    def _within_reach(self, sound: str) -> Iterable[tuple[str, str]]:
        """The venue words (and their sounds) that may lie within :attr:`max_distance` of ``sound``: a first sound
        that is the same or near (a word's first sound is the one a recognizer most rarely gets wrong), a length
        near enough, and a plain edit distance no more than twice the largest distance allowed (every step of
        :func:`phonetic_distance` costs at least half of one)."""
        n, reach = len(sound), self.max_distance
        for first, (lengths, group) in self._by_first.items():
            if _cost(sound[0], first) >= 1.0:
                continue
            low = bisect.bisect_left(lengths, int(n * (1 - reach)))
            high = bisect.bisect_right(lengths, int(n / (1 - reach)) + 1)
            for word, venue_sound in group[low:high]:
                longer = max(n, len(venue_sound))
                if abs(n - len(venue_sound)) > reach * longer:
                    continue  # too different in length to be near enough
                cutoff = int(2 * reach * longer)
                if Levenshtein.distance(sound, venue_sound, score_cutoff=cutoff) > cutoff:
                    continue
                yield word, venue_sound

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
