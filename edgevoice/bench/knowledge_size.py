"""Cost of a large knowledge file: the kiosk's load, cold (no embedding cache) and warm, and its grounding per question.

Usage: .venv/bin/python -m edgevoice.bench.knowledge_size [--entries 1 500 5000] [--questions 60] [--words-only]

For each size it writes a synthetic knowledge file of that many entries (invented names, so that the vocabulary
grows with the file as a real one does), builds the kiosk as ``edgevoice run`` does (the installed sentence encoder
and espeak-ng phonemes, unless ``--words-only``) with an empty embedding cache, then again with the cache it left,
and grounds questions: the entries' own questions, rewordings, misspelt names (which try the mend by sound) and
questions the file does not answer. It prints the load times (cold: until the kiosk answers, by words while a large
knowledge is embedded in the background, and until it matches by meaning) and the grounding time per question (p50,
p95), with the question's forward pass of the encoder and without it (the question embedded beforehand: what the
index costs).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
from pathlib import Path

from edgevoice.app import load_embedder, load_phonemizer
from edgevoice.config import Config
from edgevoice.data import sample_persona
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import parse_knowledge

SYLLABLES = ("ka", "lo", "ven", "dra", "mi", "tor", "sel", "bri", "an", "ux",
             "pel", "gor", "tha", "rin", "mos", "quel", "ber", "fa", "zin", "ol")  # fmt: skip
PLACES = ("gallery", "workshop", "locker", "exhibit", "room", "cafe", "shop", "desk",
          "garden", "library", "studio", "hall", "lounge", "office", "kiosk")  # fmt: skip
SIDES = ("north", "south", "east", "west", "upper", "lower", "old", "new", "blue", "green", "quiet", "main")


def synthetic_knowledge(n: int, seed: int = 7) -> tuple[str, list[str]]:
    """``n`` entries of one question and answer per line, and questions about them (asked as written, reworded,
    misspelt, or not answered by the file)."""
    rng = random.Random(seed)
    seen: set[str] = set()

    def name() -> str:
        while True:
            word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()
            if word not in seen:
                seen.add(word)
                return word

    lines, questions = [], []
    for _ in range(n):
        place, side, kind = f"{name()} {rng.choice(PLACES)}", rng.choice(SIDES), rng.randrange(4)
        if kind == 0:
            lines.append(f"Where is the {place}? The {place} is in the {side} wing on floor {rng.randint(0, 6)}.")
            questions += [f"Where is the {place}?", f"How do I find the {place}?"]
        elif kind == 1:
            lines.append(f"When does the {place} open? It opens at {rng.randint(7, 11)} and closes at 18.")
            questions += [f"What time does the {place} open?", f"Is the {place} open on Sundays?"]
        elif kind == 2:
            lines.append(f"How much is the {place} tour? The {place} tour costs {rng.randint(2, 40)} euros.")
            questions += [f"How much is the {place} tour?", f"What does the {place[:-1]} tour cost?"]
        else:
            lines.append(f"Who runs the {place}? The {place} is run by {name()} {name()}.")
            questions += [f"Who is in charge of the {place}?", f"Can I bring my dog to the {place}?"]
    rng.shuffle(questions)
    return "\n".join(lines) + "\n", questions


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def bench(n: int, questions: int, embedder: object, phonemize: object, cache: Path) -> None:
    text, asked = synthetic_knowledge(n)
    asked = asked[:questions]  # each once: a question grounded again reuses its embedding
    started = time.perf_counter()
    entries = parse_knowledge(text, warnings=[])
    parse_s = time.perf_counter() - started
    loads, meaning = [], []
    for _ in ("cold", "warm"):
        started = time.perf_counter()
        kiosk = Kiosk(
            sample_persona(),
            text,
            embedder=embedder,  # type: ignore[arg-type]
            phonemize=phonemize,  # type: ignore[arg-type]
            embedding_cache=cache,
        )
        loads.append(time.perf_counter() - started)
        kiosk.wait_semantic()
        meaning.append(time.perf_counter() - started)
    total, index_only = [], []
    for question in asked:
        started = time.perf_counter()
        kiosk.ground(question)
        total.append(1000 * (time.perf_counter() - started))
        if kiosk.semantic is not None:
            kiosk.semantic.embed_question(question + " ")  # a different key: embedded now, then timed without it
        started = time.perf_counter()
        kiosk.ground(question + " ")
        index_only.append(1000 * (time.perf_counter() - started))
    print(
        f"{n:>6} entries {len(text) / 1e3:>7.0f} kB | parse {parse_s:6.2f} s | load cold {loads[0]:7.1f} s "
        f"(by meaning after {meaning[0]:7.1f} s), warm {loads[1]:5.1f} s | ground p50 {percentile(total, 0.5):6.1f} "
        f"ms, p95 {percentile(total, 0.95):6.1f} ms"
        f" | without the question's embedding p50 {percentile(index_only, 0.5):5.1f} ms, "
        f"p95 {percentile(index_only, 0.95):6.1f} ms (mean {statistics.fmean(index_only):.1f})",
        flush=True,
    )
    del entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1, 500, 5000])
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--words-only", action="store_true", help="no sentence encoder, no phonemes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    embedder = None if args.words_only else load_embedder(Config())
    phonemize = None if args.words_only else load_phonemizer()
    if embedder is not None and phonemize is not None:  # first calls pay one-time costs: not the knowledge's
        embedder.embed(["Where is the cafe?"])
        phonemize("Where is the cafe?")
    for n in args.entries:
        with tempfile.TemporaryDirectory(prefix="edgevoice-bench-") as cache:
            bench(n, args.questions, embedder, phonemize, Path(cache))


if __name__ == "__main__":
    main()
