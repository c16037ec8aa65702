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
_QUOTE = re.compile(r"^\s*>+\s?", re.M)
_TABLE = re.compile(r"\s*\|\s*")
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
    text = _QUOTE.sub("", text)
    text = re.sub(r"^[ \t|:-]*\|[ \t|:-]*$", "", text, flags=re.M)  # a table's rule line
    text = _TABLE.sub(", ", re.sub(r"^[ \t|]+|[ \t|]+$", "", text, flags=re.M)).replace(":, ", ": ")
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
    if result and result[-1] in ":;":  # a trailing comma stays: a clause of a longer sentence ends with one
        result = result[:-1] + "."
    return result


# -- normalization for the synthesizer ----------------------------------------------------------------------------

_CURRENCY = {"€": "euros", "$": "dollars", "£": "pounds", "EUR": "euros", "USD": "dollars", "GBP": "pounds"}
_CURRENCY_ONE = {"€": "euro", "$": "dollar", "£": "pound", "EUR": "euro", "USD": "dollar", "GBP": "pound"}
_UNITS = {
    "km": ("kilometre", "kilometres"),
    "m": ("metre", "metres"),
    "cm": ("centimetre", "centimetres"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "km/h": ("kilometre per hour", "kilometres per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "ft": ("foot", "feet"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "%": ("percent", "percent"),
    "x": ("time", "times"),
}
_ABBREVIATIONS = {
    "e.g.": "for example",
    "i.e.": "that is",
    "etc.": "and so on",
    "approx.": "approximately",
    "ca.": "about",
    "Dr.": "Doctor",
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Prof.": "Professor",
    "Rd.": "Road",
    "Ave.": "Avenue",
    "Sq.": "Square",
    "Mon": "Monday",
    "Tue": "Tuesday",
    "Tues": "Tuesday",
    "Wed": "Wednesday",
    "Thu": "Thursday",
    "Thurs": "Thursday",
    "Fri": "Friday",
    "Sat": "Saturday",
    "Sun": "Sunday",
    "no.": "number",
    "No.": "number",
    "vs.": "versus",
}
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_FRACTIONS = {
    "1/2": "one half",
    "1/3": "one third",
    "1/4": "one quarter",
    "3/4": "three quarters",
    "24/7": "day and night",
}

_NUMBER = r"\d+(?:[.,]\d+)*"
_STREET = re.compile(r"\b([A-Z][a-z]+\s+)St\.")  # "High St." is a street; "St. Mary" a saint
_PHONE = re.compile(r"(?<![\w.])\+?\d{2,4}(?:[ -]\d{2,4}){1,4}(?!\w|[.,]\d)")
_RANGE = re.compile(
    rf"(\b(?:\d+(?::\d\d)?\s?(?:am|pm|a\.m\.|p\.m\.|st|nd|rd|th|h)?|{_DAYS}))\s?[-–—]\s?(?=\d|{_DAYS})", re.I
)
_NEGATIVE = re.compile(r"(?<![\w.])-(?=\d)")
_DECADE = re.compile(r"\b(1[5-9]|20)?(\d0)'?s\b")
_DATE_AFTER_MONTH = re.compile(rf"\b({_MONTHS})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)")
_DATE_BEFORE_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTHS})\b")
_MONEY = re.compile(
    rf"([€$£])\s?({_NUMBER})|({_NUMBER})\s?([€$£])|\b(EUR|USD|GBP)\s?({_NUMBER})|({_NUMBER})\s?(EUR|USD|GBP)\b"
)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s?(am|pm|a\.m\.|p\.m\.)(?=\W|$)", re.I)
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_UNIT = re.compile(rf"({_NUMBER})\s?(km/h|°C|°F|km|cm|kg|mins|min|hrs|mph|ft|%|m|g|h|x)(?=\W|$)")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_PLAIN_NUMBER = re.compile(rf"(?<![\w.]){_NUMBER}(?![\w])")


def _words(number: str) -> str:
    if "," in number and re.fullmatch(r"\d{1,3}(?:,\d{3})+", number):  # 1,200: a thousands separator
        number = number.replace(",", "")
    value: int | float = float(number.replace(",", ".")) if "." in number or "," in number else int(number)
    if isinstance(value, float) and value.is_integer() and "." not in number:
        value = int(value)
    return str(num2words(value)).replace("-", " ").replace(",", "")


def _ordinal(number: str) -> str:
    return str(num2words(int(number), to="ordinal")).replace("-", " ").replace(",", "")


def _money(m: re.Match[str]) -> str:
    symbol = m.group(1) or m.group(4) or m.group(5) or m.group(8)
    amount = m.group(2) or m.group(3) or m.group(6) or m.group(7)
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
    return f"{spoken} {'AM' if half == 'am' else 'PM'}"  # capitals: espeak spells them ("a m" is read as "uh em")


def _clock(m: re.Match[str]) -> str:
    """A 24-hour time as a person says it: "14:00" is "two PM" (not "fourteen o'clock"), "9:30" "nine thirty"."""
    hour, minute = int(m.group(1)), m.group(2)
    half = ""
    if 13 <= hour <= 23 and int(minute) < 60:
        hour, half = hour - 12, " PM"
    elif hour == 0 and int(minute) < 60:
        hour, half = 12, " AM"
    if minute == "00":
        return _words(str(hour)) + (half or " o'clock")
    return f"{_words(str(hour))} {'oh ' + _words(minute) if minute.startswith('0') else _words(minute)}{half}"


def _unit(m: re.Match[str]) -> str:
    number, unit = m.group(1), m.group(2)
    one, many = _UNITS[unit]
    return f"{_words(number)} {one if number == '1' else many}"


def _phone(m: re.Match[str]) -> str:
    """A phone number digit by digit, its groups separated by pauses."""
    groups = re.findall(r"\d+", m.group(0))
    if sum(map(len, groups)) < 7 or all(_YEAR.fullmatch(g) for g in groups):  # short, or years: 2024-2025
        return m.group(0)
    spoken = ", ".join(" ".join(_words(d) for d in group).replace("zero", "oh") for group in groups)
    return ("plus " if m.group(0).startswith("+") else "") + spoken


def _decade(m: re.Match[str]) -> str:
    century, tens = m.group(1), m.group(2)
    spoken = str(num2words(int(century + tens), to="year")) if century else _words(tens)
    words = spoken.replace("-", " ").split()
    words[-1] = words[-1][:-1] + "ies" if words[-1].endswith("y") else words[-1] + "s"
    return " ".join(words)


def normalize_for_speech(text: str) -> str:
    """Spell out money, times, ranges, dates, units, phone numbers, ordinals, years, numbers and common
    abbreviations, so the voice reads them as a person would."""
    text = _STREET.sub(r"\1Street", text)
    text = re.sub(r"(?<!\w)St\.", "Saint", text)
    for short, long in _ABBREVIATIONS.items():
        if short.endswith("."):  # its dot also ends the text: keep one
            text = re.sub(rf"(?<!\w){re.escape(short)}\s*$", long + ".", text)
        text = re.sub(rf"(?<!\w){re.escape(short)}(?!\w)", long, text)
    for fraction, spoken in _FRACTIONS.items():
        text = re.sub(rf"(?<![\w/]){re.escape(fraction)}(?![\w/])", spoken, text)
    text = _PHONE.sub(_phone, text)
    text = _RANGE.sub(r"\1 to ", text)
    text = _NEGATIVE.sub("minus ", text)
    text = _DECADE.sub(_decade, text)
    text = _DATE_AFTER_MONTH.sub(lambda m: f"{m.group(1)} {_ordinal(m.group(2))}", text)
    text = _DATE_BEFORE_MONTH.sub(lambda m: f"the {_ordinal(m.group(1))} of {m.group(2)}", text)
    text = _MONEY.sub(_money, text)
    text = _TIME.sub(_time, text)
    text = _CLOCK.sub(_clock, text)
    text = _UNIT.sub(_unit, text)
    text = _ORDINAL.sub(lambda m: _ordinal(m.group(1)), text)
    text = _YEAR.sub(lambda m: str(num2words(int(m.group(1)), to="year")).replace("-", " "), text)
    text = _PLAIN_NUMBER.sub(lambda m: _words(m.group(0)), text)
    text = text.replace("&", " and ").replace("#", " number ")
    return re.sub(r"\s+", " ", text).strip()
