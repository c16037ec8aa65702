"""Making text speakable: strip what cannot be read aloud, keep it short, and spell out numbers and symbols.

The language model is asked for plain spoken sentences, but small models still emit markdown, lists or code now and
then; nothing of that may reach the loudspeaker.
"""

from __future__ import annotations

import re

from num2words import num2words

_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_INLINE_CODE = re.compile(r"`([^`]*)`")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.I)
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+", re.M)
_HEADING = re.compile(r"^\s*#+\s*", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f900-\U0001f9ff\U00002b00-\U00002bff\ufe0f\u200d]"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def strip_markup(text: str) -> str:
    """Remove code, links, list marks, headings, emphasis and emoji; join lines into running text."""
    text = _CODE_BLOCK.sub(" ", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _HEADING.sub("", text)
    text = _LIST_MARK.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _EMOJI.sub("", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = ""
    for line in lines:
        if joined and joined[-1] not in ".!?:;,":
            joined += "."
        joined = f"{joined} {line}" if joined else line
    return re.sub(r"\s+", " ", joined).strip()


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def speakable(text: str, *, max_sentences: int = 2) -> str:
    """Plain running text of at most ``max_sentences`` sentences, ending with a full stop if it was cut mid-way."""
    sentences = split_sentences(strip_markup(text))[:max_sentences]
    result = " ".join(sentences).strip()
    if result and result[-1] in ":;,":
        result = result[:-1] + "."
    return result


# -- normalization for the synthesizer ----------------------------------------------------------------------------

_CURRENCY = {"€": "euros", "$": "dollars", "£": "pounds"}
_CURRENCY_ONE = {"€": "euro", "$": "dollar", "£": "pound"}
_UNITS = {
    "km": ("kilometre", "kilometres"),
    "m": ("metre", "metres"),
    "cm": ("centimetre", "centimetres"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "km/h": ("kilometre per hour", "kilometres per hour"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "%": ("percent", "percent"),
}
_ABBREVIATIONS = {
    "e.g.": "for example",
    "i.e.": "that is",
    "etc.": "and so on",
    "approx.": "approximately",
    "Dr.": "Doctor",
    "St.": "Saint",
    "Mon": "Monday",
    "Tue": "Tuesday",
    "Wed": "Wednesday",
    "Thu": "Thursday",
    "Fri": "Friday",
    "Sat": "Saturday",
    "Sun": "Sunday",
    "no.": "number",
    "vs.": "versus",
}

_NUMBER = r"\d+(?:[.,]\d+)?"
_MONEY = re.compile(rf"([€$£])\s?({_NUMBER})|({_NUMBER})\s?([€$£])")
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s?(am|pm|a\.m\.|p\.m\.)(?=\W|$)", re.I)
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_UNIT = re.compile(rf"({_NUMBER})\s?(km/h|°C|km|cm|kg|min|%|m|g|h)(?=\W|$)")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_PLAIN_NUMBER = re.compile(rf"(?<![\w.]){_NUMBER}(?![\w])")


def _words(number: str) -> str:
    value = float(number.replace(",", "")) if "." in number or "," in number else int(number)
    if isinstance(value, float) and value.is_integer() and "," in number:
        value = int(value)
    return str(num2words(value)).replace("-", " ")


def _money(m: re.Match[str]) -> str:
    symbol = m.group(1) or m.group(4)
    amount = m.group(2) or m.group(3)
    if "." in amount:
        whole, cents = amount.split(".", 1)
        unit = _CURRENCY[symbol] if whole != "1" else _CURRENCY_ONE[symbol]
        return f"{_words(whole)} {unit} {_words(cents.ljust(2, '0')[:2])}"
    return f"{_words(amount)} {_CURRENCY_ONE[symbol] if amount == '1' else _CURRENCY[symbol]}"


def _time(m: re.Match[str]) -> str:
    hour, minute, half = m.group(1), m.group(2), m.group(3).lower().replace(".", "")
    spoken = _words(hour)
    if minute and minute != "00":
        spoken += " " + (f"oh {_words(minute)}" if minute.startswith("0") else _words(minute))
    return f"{spoken} {'a m' if half == 'am' else 'p m'}"


def _clock(m: re.Match[str]) -> str:
    hour, minute = m.group(1), m.group(2)
    if minute == "00":
        return f"{_words(hour)} o'clock"
    return f"{_words(hour)} {'oh ' + _words(minute) if minute.startswith('0') else _words(minute)}"


def _unit(m: re.Match[str]) -> str:
    number, unit = m.group(1), m.group(2)
    one, many = _UNITS[unit]
    return f"{_words(number)} {one if number == '1' else many}"


def normalize_for_speech(text: str) -> str:
    """Spell out money, times, units, ordinals, years, numbers and common abbreviations."""
    for short, long in _ABBREVIATIONS.items():
        text = re.sub(rf"(?<!\w){re.escape(short)}(?!\w)", long, text)
    text = _MONEY.sub(_money, text)
    text = _TIME.sub(_time, text)
    text = _CLOCK.sub(_clock, text)
    text = _UNIT.sub(_unit, text)
    text = _ORDINAL.sub(lambda m: str(num2words(int(m.group(1)), to="ordinal")).replace("-", " "), text)
    text = _YEAR.sub(lambda m: str(num2words(int(m.group(1)), to="year")).replace("-", " "), text)
    text = _PLAIN_NUMBER.sub(lambda m: _words(m.group(0)), text)
    text = text.replace("&", " and ")
    return re.sub(r"\s+", " ", text).strip()
