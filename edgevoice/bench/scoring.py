"""Scoring for the quality benchmark: word error rate, facts in a reply, honest "don't know", speakability."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

import jiwer
from whisper_normalizer.english import EnglishSpellingNormalizer

from edgevoice.reply.speech_text import normalize_for_speech, split_sentences
from edgevoice.words import words as split_words

__all__ = [
    "corpus_wer",
    "has_fact",
    "has_markup",
    "invented_values",
    "is_dont_know",
    "is_small_talk_reply",
    "join_compounds",
    "sentence_count",
    "spoken_values",
    "states_value",
    "word_error_rate",
    "words",
]

_CONTRACTIONS = {"'s": " is", "'re": " are", "n't": " not", "'m": " am", "'ll": " will", "'ve": " have", "'d": " would"}
_SPELLINGS = {"wi fi": "wifi", "can not": "cannot", "a m": "am", "p m": "pm"}
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")


@cache
def _american() -> EnglishSpellingNormalizer:
    """Whisper's own British-to-American spelling table (``colour`` = ``color``), as its WER evaluation uses."""
    return EnglishSpellingNormalizer()


def words(text: str) -> list[str]:
    """Lower-case words for comparison, as they sound: numbers, times and prices spelled out, punctuation and
    hyphens removed, contractions expanded (``what's`` = ``what is``), a name written in one (``CityLibrary``)
    as its words, British and American spellings as one (``colour`` = ``color``)."""
    text = normalize_for_speech(_CAMEL.sub(" ", text)).lower().replace("’", "'")
    for short, long in _CONTRACTIONS.items():
        text = text.replace(short, long)
    text = " ".join(split_words(text, spoken=True))
    for variant, canonical in _SPELLINGS.items():
        text = re.sub(rf"\b{variant}\b", canonical, text)
    return _american()(text).split()


def join_compounds(ref: Sequence[str], hyp: Sequence[str]) -> list[str]:
    """``hyp`` with two neighbours joined where ``ref`` has them as one word, and a word split where ``ref`` has
    its two halves next to each other: "book shop" and "bookshop" sound the same (sclite's compound rule)."""
    joined = {"".join(ref[i : i + 2]): ref[i : i + 2] for i in range(len(ref) - 1)}
    singles = set(ref)
    out: list[str] = []
    i = 0
    while i < len(hyp):
        pair = "".join(hyp[i : i + 2])
        if i + 1 < len(hyp) and pair in singles and hyp[i] not in singles:
            out.append(pair)
            i += 2
            continue
        out.extend(joined[hyp[i]] if hyp[i] in joined and hyp[i] not in singles else [hyp[i]])
        i += 1
    return out


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word error rate of one utterance: :func:`corpus_wer` of the one pair."""
    return corpus_wer([(reference, hypothesis)])


def corpus_wer(pairs: Sequence[tuple[str, str]]) -> float:
    """Word error rate over many utterances (jiwer's): all substitutions, deletions and insertions over all
    reference words, comparing :func:`words` with a hypothesis's compounds joined as its reference writes them
    (:func:`join_compounds`). A reference without words counts each word of its hypothesis as an error."""
    refs, hyps = [], []
    errors = 0
    for reference, hypothesis in pairs:
        ref = words(reference)
        hyp = join_compounds(ref, words(hypothesis))
        if ref:
            refs.append(" ".join(ref))
            hyps.append(" ".join(hyp))
        else:
            errors += len(hyp)  # jiwer takes no empty reference
    if refs:
        out = jiwer.process_words(refs, hyps)
        errors += out.substitutions + out.deletions + out.insertions
    return errors / max(1, sum(len(r.split()) for r in refs))


def _contains(haystack: list[str], needle: list[str], *, plural: bool = False) -> bool:
    """``needle`` as consecutive words of ``haystack``; with ``plural``, its last word may take an "s" ("on
    Thursdays" says "Thursday")."""
    n = len(needle)
    if n == 0:
        return False
    for i in range(len(haystack) - n + 1):
        *head, last = haystack[i : i + n]
        if head == needle[:-1] and (last == needle[-1] or (plural and last == needle[-1] + "s")):
            return True
    return False


_DONT_KNOW = [
    words(p)
    for p in (
        "don't know",
        "do not know",
        "not sure",
        "ask at the desk",
        "ask at the information desk",
        "ask a member of staff",
        "no information",
        "don't have information",
        "can only help with questions about this venue",
    )
]


def is_dont_know(reply: str) -> bool:
    """True when the reply declines: "I don't know", "please ask at the desk" and the like."""
    said = words(reply)
    return any(_contains(said, phrase) for phrase in _DONT_KNOW)


def has_fact(reply: str, facts: Sequence[Sequence[str]]) -> bool:
    """True when the reply contains one spelling of every fact group and is not a "don't know"."""
    if not facts or is_dont_know(reply):
        return False
    said = words(reply)
    return all(any(_contains(said, words(spelling), plural=True) for spelling in group) for group in facts)


_MARKUP = re.compile(r"[*_`#|<>\[\]{}]|^\s*(?:[-•]|\d+[.)])\s", re.M)
_EMOJI = re.compile("[\U0001f000-\U0001faff\U00002600-\U000027bf]")


def has_markup(reply: str) -> bool:
    """Markdown marks, list items, code or emoji: what a loudspeaker must never be asked to read."""
    return bool(_MARKUP.search(reply) or _EMOJI.search(reply) or "http" in reply)


def sentence_count(reply: str) -> int:
    return len(split_sentences(reply))


_NUMBER_WORDS = frozenset(
    """zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million point
    half quarter""".split()  # noqa: SIM905
)
_NOT_ALONE = frozenset({"one", "oh", "half", "quarter", "point"})
"""Number words that say no number on their own ("one of the", "oh", "half the floor")."""


def _number_runs(said: Sequence[str]) -> list[tuple[str, ...]]:
    """The maximal runs of number words in ``said`` (spelled out by :func:`words`: "5:30 pm" is "five thirty pm")."""
    runs: list[tuple[str, ...]] = []
    run: list[str] = []
    for w in [*said, ""]:
        if w in _NUMBER_WORDS:
            run.append(w)
            continue
        if run and not (len(run) == 1 and run[0] in _NOT_ALONE):
            runs.append(tuple(run))
        run = []
    return runs


def spoken_values(text: str) -> list[str]:
    """The numbers, times and prices in ``text`` as spoken words, in order, each once ("5 pm" and "17:00" are
    "five")."""
    return list(dict.fromkeys(" ".join(r) for r in _number_runs(words(text))))


def states_value(value: str, stated: Sequence[str]) -> bool:
    """Whether ``value`` (of :func:`spoken_values`) occurs inside one of the ``stated`` values ("nine" in "nine
    thirty")."""
    return any(f" {value} " in f" {k} " for k in stated)


def invented_values(reply: str, knowledge: str) -> list[str]:
    """The numbers, times and prices in ``reply`` that the ``knowledge`` text never states, as spoken words.

    Both are compared as they sound (:func:`words`), so "5 pm", "17:00" and "five p m" are one value; a value is
    stated when its run of number words occurs inside one of the knowledge's ("nine" in "nine thirty")."""
    known = spoken_values(knowledge)
    return [value for value in spoken_values(reply) if not states_value(value, known)]


def is_small_talk_reply(reply: str, max_sentences: int = 2) -> bool:
    """A reply fit for small talk: something said, neither a refusal nor a "don't know", and short."""
    return bool(words(reply)) and not is_dont_know(reply) and sentence_count(reply) <= max_sentences
