"""ClauseChunker: speak an LLM's streamed reply in pieces, the first one as early as possible."""

from __future__ import annotations

import random

import pytest

from edgevoice.errors import ConfigError
from edgevoice.reply.chunker import ClauseChunker

FLUSH = "flush"
LONG = "the museum has many rooms with paintings sculptures old maps rare coins musical instruments ancient tools"
LONG += " and modern art from local artists every day"


def tok(tokens: str) -> list[str]:
    """LLM tokens written as one string, separated by "|"."""
    return tokens.split("|")


# (LLM tokens, [(index of the token whose feed released the piece, or FLUSH), piece])
CASES: list[tuple[list[str], list[tuple[int | str, str]]]] = [
    # The first piece goes at the first comma: speech starts after two tokens.
    (
        tok("Sure|,| the| cafe| is| on| the| top| floor|."),
        [(2, "Sure,"), (FLUSH, "the cafe is on the top floor.")],
    ),
    # No punctuation yet: the first piece goes after six words, at a word boundary; then whole sentences.
    (
        tok("The| cafe| is| on| the| top| floor| of| the| east| wing|.| It| opens| at| 10|:|30|."),
        [(6, "The cafe is on the top"), (12, "floor of the east wing."), (FLUSH, "It opens at 10:30.")],
    ),
    # ...but not right after "the": one more word.
    (
        tok("You| can| buy| tickets| at| the| main| desk| today|."),
        [(7, "You can buy tickets at the main"), (FLUSH, "desk today.")],
    ),
    # Prices, thousands and times stay whole.
    (
        tok("It| costs| 9|.|50| euros|,| or| 1|,|200| yen| for| a| group|.| Open| at| 10|:|30|."),
        [(7, "It costs 9.50 euros,"), (16, "or 1,200 yen for a group."), (FLUSH, "Open at 10:30.")],
    ),
    # Abbreviations: "e.g." and "Dr." never end a sentence; "a.m."/"p.m." only before a capital.
    (
        tok(
            "Bring| ID|,| e|.g|.| a| passport|.| We| open| at| 9| a|.m|.| and| close| at| 5| p|.m|.| Dr|.| Li|"
            + " will| meet| you|."
        ),
        [
            (3, "Bring ID,"),
            (9, "e.g. a passport."),
            (23, "We open at 9 a.m. and close at 5 p.m."),
            (FLUSH, "Dr. Li will meet you."),
        ],
    ),
    (
        tok("Big| cities|,| e|.g|.| London| or| Paris|,| are| busy|."),
        [(3, "Big cities,"), (10, "e.g. London or Paris,"), (FLUSH, "are busy.")],
    ),
    # Later clauses need four words; a shorter one joins the next.
    (
        tok("Yes|.| It| is| open|,| and| the| shop| next| to| it| is| open| too|,| until| six|."),
        [(2, "Yes."), (16, "It is open, and the shop next to it is open too,"), (FLUSH, "until six.")],
    ),
    # A run-on sentence is cut after 20 words (21 here: the 20th is "from").
    (
        ["Well", ","] + [" " + w for w in LONG.split()] + ["."],
        [(2, "Well,"), (23, " ".join(LONG.split()[:21])), (FLUSH, "artists every day.")],
    ),
    # A line break ends a piece even without a full stop.
    (
        tok("Opening| hours|\n|Monday| to| Friday|\n\n|Closed| Sundays"),
        [(2, "Opening hours"), (6, "Monday to Friday"), (FLUSH, "Closed Sundays")],
    ),
    # Dashes are clause marks, with or without spaces.
    (
        tok("The| cafe|—|on| the| top| floor|—|opens| at| ten|."),
        [(3, "The cafe—"), (8, "on the top floor—"), (FLUSH, "opens at ten.")],
    ),
    (
        tok("Yes| -| the| lift| is| on| the| left| –| next| to| the| shop|."),
        [(2, "Yes -"), (9, "the lift is on the left –"), (FLUSH, "next to the shop.")],
    ),
    # Closing quotes stay with their sentence.
    (tok('He| said| "|hi|!"| Then| left|.'), [(5, 'He said "hi!"'), (FLUSH, "Then left.")]),
    # "No." is an answer, unless a number follows.
    (
        tok("No|.| The| No|.| 5| bus| stops| here|."),
        [(2, "No."), (FLUSH, "The No. 5 bus stops here.")],
    ),
    (
        tok("Tea|,| coffee|,| juice| etc|.| All| organic|."),
        [(2, "Tea,"), (7, "coffee, juice etc."), (FLUSH, "All organic.")],
    ),
    (tok("Well|...| let| me| check|."), [(2, "Well..."), (FLUSH, "let me check.")]),
    # The end of the stream decides what the last token could not: flush gives the rest.
    (tok("See| you| at| 9| a|.m|."), [(FLUSH, "See you at 9 a.m.")]),
    ([], [(FLUSH, "")]),
]


def run(chunker: ClauseChunker, tokens: list[str]) -> list[tuple[int | str, str]]:
    out: list[tuple[int | str, str]] = []
    for i, token in enumerate(tokens):
        out.extend((i, piece) for piece in chunker.feed(token))
    out.append((FLUSH, chunker.flush()))
    return out


@pytest.mark.parametrize(
    ("tokens", "expected"), CASES, ids=lambda v: "".join(v)[:30] if v and isinstance(v[0], str) else ""
)
def test_pieces_and_when_they_are_released(tokens: list[str], expected: list[tuple[int | str, str]]) -> None:
    assert run(ClauseChunker(), tokens) == expected


@pytest.mark.parametrize(("tokens", "expected"), CASES)
def test_nothing_is_lost_and_token_boundaries_do_not_matter(
    tokens: list[str], expected: list[tuple[int | str, str]]
) -> None:
    text = "".join(tokens)
    pieces = [piece for _, piece in expected if piece]
    assert "".join("".join(pieces).split()) == "".join(text.split())
    rng = random.Random(len(text))
    for _ in range(20):  # the same text, cut into random pieces (one character each, some of them)
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, len(text))))) if text else []
        parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert [piece for _, piece in run(ClauseChunker(), parts) if piece] == pieces


def test_each_reply_starts_with_a_quick_first_piece_again() -> None:
    chunker = ClauseChunker()
    assert run(chunker, ["Hi", ",", " there", ",", " you", "."]) == [(2, "Hi,"), (FLUSH, "there, you.")]
    assert run(chunker, ["Ok", ",", " bye", "."]) == [(2, "Ok,"), (FLUSH, "bye.")]
    assert chunker.pending == ""


def test_settings() -> None:
    chunker = ClauseChunker(first_max_words=2, min_words=1, max_words=3)
    tokens = ["One", " two", " three", " four", ",", " five", " six", " seven", " eight", " nine"]
    assert run(chunker, tokens) == [(2, "One two"), (5, "three four,"), (8, "five six seven"), (FLUSH, "eight nine")]
    for kwargs, key in (
        ({"first_max_words": 0}, "first_max_words"),
        ({"min_words": True}, "min_words"),
        ({"max_words": 3}, "max_words"),
    ):
        with pytest.raises(ConfigError, match=key):
            ClauseChunker(**kwargs)  # type: ignore[arg-type]


def test_in_a_hurry_later_pieces_are_cut_as_early_as_a_first_one() -> None:
    tokens = ["Yes", ",", " there", " is", " a", " cafe", " in", " the", " Lighthouse", " wing", " upstairs", "."]
    relaxed = ClauseChunker()
    assert run(relaxed, tokens) == [(2, "Yes,"), (FLUSH, "there is a cafe in the Lighthouse wing upstairs.")]
    hurried = ClauseChunker()
    pieces = [(0, p) for p in hurried.feed(tokens[0])] + [(1, p) for p in hurried.feed(tokens[1])]
    for i, token in enumerate(tokens[2:], 2):  # the speaker is running dry: "Yes," is a short piece
        pieces += [(i, p) for p in hurried.feed(token, hurry=True)]
    pieces.append((FLUSH, hurried.flush()))
    assert pieces == [(2, "Yes,"), (6, "there is a cafe"), (10, "in the Lighthouse wing"), (FLUSH, "upstairs.")]
