"""Idle CPU before and after, and each technique switched off, side by side in one run (`edgevoice bench --idle`'s
measurement, :func:`edgevoice.bench.idle.run_idle`).

    PYTHONPATH=$PWD .venv/bin/python scripts/idle_ablation.py --checkout before=/path/to/checkout [--rounds 3]

``--checkout NAME=DIR`` (repeatable): a checkout of another commit (``git worktree add --detach DIR COMMIT``), whose
appliance runs from there with its defaults, beside this checkout's with its defaults and with each key of ``--off``
switched off.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edgevoice.bench.idle import IdleVariant, format_idle, run_idle
from edgevoice.config import Config
from edgevoice.models.store import ModelStore

TECHNIQUES: tuple[str, ...] = ()
"""The idle techniques with a config switch, each measured switched off (the output's silent path and ONNX Runtime's
sleeping pools have none: compare checkouts of the commits before and after them with ``--checkout``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", default=[], help="NAME=DIR: another commit's checkout")
    parser.add_argument("--off", nargs="*", default=list(TECHNIQUES), help="keys switched off one at a time")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    variants = []
    for spec in args.checkout:
        name, _, where = spec.partition("=")
        checkout = Path(where).resolve()
        variants.append(IdleVariant(name, env={"PYTHONPATH": str(checkout)}, cwd=checkout))
    variants.append(IdleVariant("after"))
    for key in args.off:
        section, name = key.split(".")
        variants.append(IdleVariant(f"after, {key} off", overrides={section: {name: False}}))
    rows = run_idle(
        Config(), ModelStore().models_dir, variants, rounds=args.rounds, seconds=args.seconds, progress=print
    )
    print(format_idle(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
