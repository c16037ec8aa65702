"""Measure the end of turn on speech: replies to half a sentence and waits after a finished one.

Each question of the benchmark venues is spoken by voices that are not the kiosk's (:mod:`edgevoice.bench.voices`)
twice: whole, and with a pause in mid-sentence after a random word (two words or more, before the last; the cut of
``scripts/text_turn_eval.py``). The paused one is spoken as "first part, rest" so the voice keeps the unfinished tone
of a comma, and the comma's quiet gap becomes a pause of :data:`PAUSE_S` (as ``scripts/make-selftest-utterances``
makes the self-test's paused utterances). Each clip goes through the listener's decision, offline and frame by
frame: Silero, the endpointer, and at each pause Smart Turn on the turn so far and the words' verdict on the
recognizer's transcript so far, fused as the listener fuses them (:func:`~edgevoice.listen.endpointing.pause_verdict`).

Per split it prints the paused questions answered within the pause (a reply to half a sentence; the issue's bound:
2 %) and the whole questions kept waiting at their end (bound: 5 %) and for how long on average, under the
configured fusion and two other rules (:data:`POLICIES`), so that settings are chosen on the development halves and
reported on the test halves. Usage, from the checkout's root: ``PYTHONPATH=. python scripts/pause_eval.py [VOICE...]``
(default: the benchmark's three voices); ``--split dev|test|both``; ``--dump FILE.jsonl`` keeps every pause's
verdicts, ``--from FILE.jsonl`` reports such a file again (under changed policies) without the engines;
``--pause S`` makes the pause S seconds long. Of the questions answered in halves, "rejoined" counts those whose rest
goes on with the ended turn (``[endpointing] rejoin_ms``, at most half a second of its reply heard).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

from edgevoice.app import load_engines, load_turn_model
from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.cli import venues
from edgevoice.bench.voices import DEFAULT_VOICES, voice_speaker
from edgevoice.config import Config
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig, Pause, pause_verdict
from edgevoice.live.rejoin import REJOIN_HEARD_S
from edgevoice.selftest.measure import loud_frames, with_longest_gap

FRAME = 512
PAUSE_S = 0.6
LEAD_S, TAIL_S = 0.5, 1.5


@dataclass
class Verdict:
    """One pause: Smart Turn's probability, the words' (None: not asked) and whether the speech was over there."""

    sound: float
    words: float | None
    final: bool
    text: str


def pauses(audio: np.ndarray, engines, turn_model, judge, config: Config) -> list[Verdict]:  # type: ignore[no-untyped-def]
    """Every pause the endpointer finds in ``audio`` (speech padded with silence), with the verdicts there; each
    pause is reported incomplete, so the turn goes on to the next."""
    clip = np.concatenate(
        [np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), audio, np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32)]
    )
    speech_end = (loud_frames(clip, SAMPLE_RATE)[-1] + 1) * SAMPLE_RATE // 100
    vad = engines.vad
    vad.reset()
    endpointer = Endpointer(config.endpointing, threshold=config.vad.threshold)
    out = []
    for i in range(0, len(clip) - FRAME + 1, FRAME):
        for event in endpointer.feed(FRAME / SAMPLE_RATE, vad.probability(clip[i : i + FRAME])):
            if not isinstance(event, Pause):
                continue
            heard = clip[: i + FRAME]
            sound = turn_model.probability_complete(heard)
            text = engines.recognizer.transcribe(heard).text
            words = judge.probability_complete(text) if judge is not None and text.strip() else None
            out.append(Verdict(float(sound), words, bool(i + FRAME >= speech_end), text))
            endpointer.report_turn_probability(0.0)
    return out


POLICIES = {
    "configured": {},
    "sound, words veto (before)": {"text_complete_at": 0.0},
    "sound alone": {"text_incomplete_below": 0.0},
}
"""The configured fusion and two others, as ``[endpointing]`` keys changed."""


def outcome(v: Verdict, config: EndpointingConfig) -> int:
    """The silence (ms) after which the listener ends the turn at this pause under ``config`` (its ``silence_ms``:
    at once)."""
    decided = pause_verdict(v.sound, v.words, config)
    return config.silence_ms if decided.p >= config.complete_threshold else decided.max_silence_ms


def main() -> None:
    parser = argparse.ArgumentParser(description="replies to half a sentence, and waits after a whole one")
    parser.add_argument("voices", nargs="*", default=list(DEFAULT_VOICES), help="voices (edgevoice/bench/voices.py)")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument("--dump", metavar="FILE", help="keep every pause's verdicts (JSON lines)")
    parser.add_argument("--from", dest="source", metavar="FILE", help="report a --dump file again, no engines")
    parser.add_argument("--pause", type=float, default=PAUSE_S, help="the pause in mid-sentence, seconds (0.6)")
    args = parser.parse_args()
    split = args.split
    config = Config()
    pause_s = args.pause
    if args.source:  # a dump of an earlier run: report it under the policies again
        cases: dict[str, list[tuple[bool, list[Verdict]]]] = {"dev": [], "test": []}
        with open(args.source) as fh:
            for line in fh:
                r = json.loads(line)
                if split in ("both", r["split"]):
                    cases[r["split"]].append((r["whole"], [Verdict(**v) for v in r["pauses"]]))
        report(cases, config)
        return
    engines, _ = load_engines(config)
    turn_model = load_turn_model(config)
    judge = engines.llm.end_of_turn_model()  # type: ignore[attr-defined]
    rng = random.Random(1)
    cases = {"dev": [], "test": []}
    dump = open(args.dump, "w") if args.dump else None  # noqa: SIM115
    took = []
    for venue in venues(["all"]):
        for q in venue.questions:
            said = q.text.split()
            cut = rng.randint(2, len(said) - 1) if len(said) >= 3 else None  # text_turn_eval.py's cuts
            if split not in ("both", q.split):
                continue
            for name in args.voices:
                speak = voice_speaker(name)
                t = time.perf_counter()
                cases[q.split].append((True, pauses(speak(q.text), engines, turn_model, judge, config)))
                if cut is not None:
                    spoken = speak(f"{' '.join(said[:cut])}, {' '.join(said[cut:])}")
                    paused = with_longest_gap(spoken, SAMPLE_RATE, pause_s)
                    if paused is not None:
                        cases[q.split].append((False, pauses(paused, engines, turn_model, judge, config)))
                if dump is not None:
                    for whole, verdicts in cases[q.split][-2 if cut is not None else -1 :]:
                        record = {"split": q.split, "voice": name, "question": q.text, "whole": whole}
                        record["pause_s"] = pause_s
                        record["cut"] = None if whole else " ".join(said[:cut])  # type: ignore[index]
                        record["pauses"] = [v.__dict__ for v in verdicts]
                        dump.write(json.dumps(record) + "\n")
                took.append(time.perf_counter() - t)
            if len(took) % 30 == 0:
                print(f"... {len(took)} questions and voices", file=sys.stderr, flush=True)
    print(f"{sum(map(len, cases.values()))} clips, {statistics.median(took):.1f} s a question and voice")
    report(cases, config, pause_s)


def rejoined(pause_s: float, ends_ms: int, cfg: EndpointingConfig) -> bool:
    """Whether the rest of a question whose turn ended after ``ends_ms`` of a ``pause_s`` pause goes on with it
    (``rejoin_ms``), its reply heard from the moment the turn ended (a reply made ahead of time: the most heard)."""
    return cfg.rejoin_ms > 0 and pause_s * 1000 <= cfg.rejoin_ms and pause_s - ends_ms / 1000 <= REJOIN_HEARD_S


def report(cases: dict[str, list[tuple[bool, list[Verdict]]]], config: Config, pause_s: float = PAUSE_S) -> None:
    for name, rows in cases.items():
        if not rows:
            continue
        whole = [v for w, v in rows if w]
        paused = [v for w, v in rows if not w]
        print(f"{name}: {len(whole)} whole questions, {len(paused)} with a pause of {pause_s:.1f} s in mid-sentence")
        print(f"  {'':28} {'half answered':>15} {'rejoined':>9} {'whole: at once':>15} {'waited':>8} {'mean wait':>10}")
        for policy, keys in POLICIES.items():
            cfg = dataclasses.replace(config.endpointing, **keys)
            # a paused question is answered in halves when a pause before its end ends the turn within the pause; a
            # whole one waits what its last pause's verdict asks beyond silence_ms (none found: the longest wait)
            # the first pause before the question's end that ends the turn within the pause, if any
            limit = pause_s * 1000
            ends = [next((o for v in vs if not v.final and (o := outcome(v, cfg)) < limit), None) for vs in paused]
            halves = sum(e is not None for e in ends)
            joined = sum(e is not None and rejoined(pause_s, e, cfg) for e in ends)
            waits = [
                min((outcome(v, cfg) for v in vs if v.final), default=cfg.incomplete_max_silence_ms) - cfg.silence_ms
                for vs in whole
            ]
            at_once = sum(w == 0 for w in waits)
            print(
                f"  {policy:28} {halves:>6} ({100 * halves / max(1, len(paused)):4.1f} %) {joined:>9}"
                f" {at_once:>6} ({100 * at_once / max(1, len(whole)):4.1f} %) {len(whole) - at_once:>8}"
                f" {statistics.mean(waits):>7.0f} ms"
            )


if __name__ == "__main__":
    main()
