"""Words of a text: the one tokenizer behind the kiosk's search terms, its reply checks, its mending by sound and the
benchmark's word comparison, so that every part cuts a text into words the same way."""

from __future__ import annotations

import re
import string
import unicodedata

__all__ = ["fold", "word_spans", "words"]

_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
"""A written word: letters and digits, joined by an apostrophe or a hyphen (``o'clock``, ``step-free``)."""
_SPOKEN_WORD = re.compile(r"[a-z']+")
"""A word as a recognizer writes what it hears: letters and apostrophes."""
_SAME_LENGTH = str.maketrans(string.ascii_uppercase + "’", string.ascii_lowercase + "'")


def fold(text: str) -> str:
    """``text`` lower-cased, with straight apostrophes and without accents (``Café’s`` is ``cafe's``)."""
    if text.isascii():
        return text.lower()  # nothing to straighten or strip: the common case, and a large knowledge file's
    text = unicodedata.normalize("NFKD", text.lower().replace("’", "'"))
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def words(text: str, *, hyphens: bool = True, spoken: bool = False) -> list[str]:
    """The written words of ``text``, folded (:func:`fold`), in order: ``"Step-free? It’s 10 o'clock"`` gives
    ``step-free``, ``it's``, ``10``, ``o'clock``.

    ``hyphens=False``: a hyphen separates two words (``step``, ``free``). ``spoken``: the words of a transcript
    or of text already spelled out for speech, as the benchmark compares them: lower-cased letters and apostrophes
    (an apostrophe stays with its word, ``visitors'``), anything else separates words; accents are not folded.
    """
    if spoken:
        return _SPOKEN_WORD.findall(text.lower().replace("’", "'"))
    text = fold(text)
    if not hyphens:
        text = text.replace("-", " ")
    return _WORD.findall(text)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """The written words of ``text`` with their places: ``(start, end, word)``, ``text[start:end]`` being the word
    as written and ``word`` it lower-cased with a straight apostrophe. To keep places, accents are not folded: a
    letter outside ``a-z`` ends a word."""
    return [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text.translate(_SAME_LENGTH))]
