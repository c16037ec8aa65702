import pytest

from edgevoice.reply.speech_text import normalize_for_speech, speakable, strip_markup


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Tickets cost €14.", "Tickets cost fourteen euros."),
        ("It is 9.50€ for students.", "It is nine euros fifty for students."),
        ("Only $1 today.", "Only one dollar today."),
        ("Open 10 am to 6 pm.", "Open ten AM to six PM."),  # capitals: spelled, not "uh em"
        ("Until 9:30 pm on Thu.", "Until nine thirty PM on Thursday."),
        ("Tours at 14:00 and 15:05.", "Tours at two PM and three oh five PM."),  # as people say them
        ("The hall is 25 m long.", "The hall is twenty five metres long."),
        ("It is 3.5 km away.", "It is three point five kilometres away."),
        ("About 21°C inside.", "About twenty one degrees Celsius inside."),
        ("Save 12% today.", "Save twelve percent today."),
        ("Built in 1892.", "Built in eighteen ninety two."),
        ("On the 2nd floor.", "On the second floor."),
        ("Room 7, e.g. the map room.", "Room seven, for example the map room."),
        ("Bread & butter.", "Bread and butter."),
        # ranges, days and dates
        ("Open 10am-6pm.", "Open ten AM to six PM."),
        ("Open 10:00-18:00 Tue-Sun.", "Open ten o'clock to six PM Tuesday to Sunday."),
        ("Last entry 00:30, doors 12:00.", "Last entry twelve thirty AM, doors twelve o'clock."),
        ("Children aged 6–12.", "Children aged six to twelve."),
        ("From the 1st-3rd floor.", "From the first to third floor."),
        ("Until March 30.", "Until March thirtieth."),
        ("Until 30 March.", "Until the thirtieth of March."),
        ("Seasons 2024-2025.", "Seasons twenty twenty four to twenty twenty five."),
        # money in words and codes, large numbers, negatives, fractions
        ("It costs 5 EUR.", "It costs five euros."),
        ("Only EUR 1 today.", "Only one euro today."),
        ("£1.05 each.", "one pound five each."),
        ("Over 1,200 visitors.", "Over one thousand two hundred visitors."),
        ("It is -5°C outside.", "It is minus five degrees Celsius outside."),
        ("Half price: 1/2.", "Half price: one half."),
        ("Open 24/7.", "Open day and night."),
        # units, counts, decades
        ("A 5 min walk, 2 hrs tour.", "A five minutes walk, two hours tour."),
        ("Up to 30 mph.", "Up to thirty miles per hour."),
        ("Three times: 3x a day.", "Three times: three times a day."),
        ("Music of the 1990s and the 80s.", "Music of the nineteen nineties and the eighties."),
        # phone numbers digit by digit; streets, saints and titles
        ("Call 555-0123.", "Call five five five, oh one two three."),
        ("Call +44 20 7946 0958.", "Call plus four four, two oh, seven nine four six, oh nine five eight."),
        ("Quay St. 12, near St. Mary.", "Quay Street twelve, near Saint Mary."),
        ("Ask Mr. Jones at Harbour Rd.", "Ask Mister Jones at Harbour Road."),
        ("Room #3, no. 5.", "Room number three, number five."),
        ("Built ca. 1890.", "Built about eighteen ninety."),
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


def test_a_clause_keeps_its_comma() -> None:
    # the responder speaks clause by clause: a comma must not become a full stop (falling intonation mid-sentence)
    assert speakable("I don't know that,") == "I don't know that,"


@pytest.mark.parametrize(
    "reply",
    [
        "## Opening hours\n- **Tue-Sun**: 10am-6pm\n- Thu: until 9pm 🎉",
        "1. Go to the `lift`\n2. Press [3](https://x.org)\n```\ncode\n```",
        "> Tickets cost *€14*. | table | row |",
    ],
)
def test_markdown_replies_come_out_plain_and_speakable(reply: str) -> None:
    spoken = normalize_for_speech(speakable(reply, max_sentences=2))
    assert spoken
    assert not any(ch in spoken for ch in "*#`[]()🎉_~|>"), spoken
    assert not any(ch.isdigit() for ch in spoken), spoken
    assert spoken.count(".") + spoken.count("!") + spoken.count("?") <= 2, spoken
