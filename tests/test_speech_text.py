import pytest

from edgevoice.speech_text import normalize_for_speech, speakable, strip_markup


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Tickets cost €14.", "Tickets cost fourteen euros."),
        ("It is 9.50€ for students.", "It is nine euros fifty for students."),
        ("Only $1 today.", "Only one dollar today."),
        ("Open 10 am to 6 pm.", "Open ten a m to six p m."),
        ("Until 9:30 pm on Thu.", "Until nine thirty p m on Thursday."),
        ("Tours at 14:00 and 15:05.", "Tours at fourteen o'clock and fifteen oh five."),
        ("The hall is 25 m long.", "The hall is twenty five metres long."),
        ("It is 3.5 km away.", "It is three point five kilometres away."),
        ("About 21°C inside.", "About twenty one degrees Celsius inside."),
        ("Save 12% today.", "Save twelve percent today."),
        ("Built in 1892.", "Built in eighteen ninety two."),
        ("On the 2nd floor.", "On the second floor."),
        ("Room 7, e.g. the map room.", "Room seven, for example the map room."),
        ("Bread & butter.", "Bread and butter."),
    ],
)
def test_normalize_for_speech(text: str, spoken: str) -> None:
    assert normalize_for_speech(text) == spoken


def test_markup_code_links_and_emoji_are_not_spoken() -> None:
    text = "**Sure!** Here is how:\n- first\n- second\n```python\nprint('hi')\n```\nSee https://example.org 😀"
    cleaned = strip_markup(text)
    for banned in ("*", "```", "print", "https", "😀", "- "):
        assert banned not in cleaned
    assert cleaned.startswith("Sure! Here is how: first. second.")


def test_speakable_keeps_at_most_n_sentences() -> None:
    text = "The cafe is on the top floor. It opens at 10 am. It closes at 5 pm."
    assert speakable(text, max_sentences=2) == "The cafe is on the top floor. It opens at 10 am."
    assert speakable("Here is a list:", max_sentences=1) == "Here is a list."
    assert speakable("", max_sentences=2) == ""
