"""`edgevoice tune`: find the fastest engine settings on this box and write them to a config file.

Each stage's knobs are searched on that stage's own latency, with the engine benchmarks of
:mod:`edgevoice.bench.engines` (medians of a few runs after a warm-up):

=============  =========================================================  ============================================
stage          knobs                                                      chosen by
=============  =========================================================  ============================================
recognition    threads; ``audio_ctx`` (sized to the utterance, or 1500)   time per utterance, at the best WER
language       threads; ``n_batch``; ``n_gpu_layers`` (all or none) where  first clause (cached first token + seven
model          llama.cpp was built with GPU offload                       tokens), then prefill tokens/s for n_batch
synthesis      ONNX Runtime intra-op threads; the CUDA execution provider  time to the first audio of a clause
               where onnxruntime has it
voice          ONNX Runtime intra-op threads (Silero VAD, Smart Turn)     time per frame plus one Smart Turn verdict
activity
=============  =========================================================  ============================================

The stages are tuned one at a time (each engine alone on the machine), and the live loop runs them mostly one after
the other, so per-stage optima hold; the result is worth checking with `edgevoice selftest`. GPU knobs are searched
only where the engines can use a GPU; on a CPU-only build they stay off. The config written is the box's own
config with the tuned keys changed; it is validated before it replaces anything.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edgevoice.config import Config
from edgevoice.models.store import ModelStore

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TuneOptions:
    repeats: int = 3
    utterances: int = 3
    threads: tuple[int, ...] = ()
    """Thread counts to try; empty: 1, 2, 4, ... up to the number of cores."""
    n_batch: tuple[int, ...] = (64, 128, 256, 512)
    audio_ctx: tuple[int, ...] = (0, 1500)

    @staticmethod
    def quick() -> TuneOptions:
        return TuneOptions(repeats=1, utterances=1, threads=(1, 2), n_batch=(128, 256), audio_ctx=(0,))


def thread_choices(cores: int | None = None) -> tuple[int, ...]:
    cores = cores or os.cpu_count() or 1
    out, n = [], 1
    while n <= cores:
        out.append(n)
        n *= 2
    if out[-1] != cores:
        out.append(cores)
    return tuple(out)


def gpu_offload() -> bool:
    """llama.cpp was built with a GPU backend (CUDA, Metal, Vulkan...)."""
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except (ImportError, AttributeError):
        return False


@dataclass
class TuneResult:
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    trials: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    gpu: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"chosen": self.overrides, "trials": self.trials, "gpu": self.gpu}


def best(rows: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """The row with the smallest ``key`` (rows without a value lose)."""
    return min(rows, key=lambda r: r[key] if isinstance(r.get(key), int | float) else float("inf"))


def tune(config: Config, store: ModelStore, options: TuneOptions, progress: Progress = lambda _m: None) -> TuneResult:
    from edgevoice.bench.engines import (
        measure_asr,
        measure_llm,
        measure_tts,
        measure_vad,
        open_recognizer,
        spoken_clips,
    )
    from edgevoice.engines.onnx_session import available_providers

    threads = options.threads or thread_choices()
    result = TuneResult(gpu={"llama_cpp": gpu_offload(), "onnxruntime_cuda": "cuda" in available_providers()})
    out = result.overrides

    # recognition: the fastest setting among those with the best word error rate
    clips = spoken_clips(options.utterances)
    recognizer = open_recognizer(config, store)
    try:
        rows = []
        for n in threads:
            for ctx in options.audio_ctx:
                rows.append(measure_asr(recognizer, clips, n, ctx, options.repeats))
                progress(f"asr threads={n} audio_ctx={ctx or 'auto'}: {rows[-1]['ms_per_utterance']} ms/utterance")
    finally:
        recognizer.close()
    accurate = [r for r in rows if r["wer"] <= min(r["wer"] for r in rows)]
    pick = best(accurate, "ms_per_utterance")
    out["asr"] = {"threads": pick["threads"], "audio_ctx": 0 if pick["audio_ctx"] == "auto" else pick["audio_ctx"]}
    result.trials["asr"] = rows

    # language model: threads (and GPU layers) by the time to a first clause, then n_batch by prefill speed
    layers = (0, -1) if result.gpu["llama_cpp"] else (config.llm.n_gpu_layers,)
    rows = []
    for n in threads:
        for gl in layers:
            rows.append(
                measure_llm(
                    config, store, threads=n, n_batch=config.llm.n_batch, n_gpu_layers=gl, repeats=options.repeats,
                    cold=False,
                )
            )  # fmt: skip
            progress(f"llm threads={n} n_gpu_layers={gl}: first clause {rows[-1]['first_clause_ms']} ms")
    pick = best(rows, "first_clause_ms")
    batches = []
    for nb in options.n_batch:
        if nb == config.llm.n_batch:
            batches.append(pick)
            continue
        batches.append(
            measure_llm(
                config, store, threads=pick["threads"], n_batch=nb, n_gpu_layers=pick["n_gpu_layers"],
                repeats=options.repeats, cold=False,
            )
        )  # fmt: skip
        progress(f"llm n_batch={nb}: prefill {batches[-1]['prompt_tokens_per_s']} tokens/s")
    fastest = max(batches, key=lambda r: r["prompt_tokens_per_s"])
    out["llm"] = {"threads": pick["threads"], "n_batch": fastest["n_batch"], "n_gpu_layers": pick["n_gpu_layers"]}
    result.trials["llm"] = rows + [r for r in batches if r is not pick]

    # synthesis
    providers = ("cpu", "cuda") if result.gpu["onnxruntime_cuda"] else ("cpu",)
    rows = []
    for n in threads:
        for provider in providers:
            rows.append(measure_tts(config, store, threads=n, provider=provider, repeats=options.repeats))
            progress(f"tts threads={n} provider={provider}: first audio {rows[-1]['first_audio_ms']} ms")
    pick = best(rows, "first_audio_ms")
    out["tts"] = {"threads": pick["threads"], "provider": pick["provider"]}
    result.trials["tts"] = rows

    # voice activity: a frame is analysed every 32 ms, Smart Turn once per pause
    rows = []
    for n in threads:
        row = measure_vad(config, store, threads=n, repeats=options.repeats)
        rows.append(row | {"score_ms": row["vad_ms_per_frame"] + row["smart_turn_ms"] / 30})
        progress(f"vad threads={n}: {row['vad_ms_per_frame']} ms/frame, smart turn {row['smart_turn_ms']} ms")
    out["vad"] = {"threads": best(rows, "score_ms")["threads"]}
    result.trials["vad"] = rows
    return result


def changed(config: Config, overrides: dict[str, dict[str, Any]]) -> list[str]:
    """``section.key: old -> new`` for every tuned key whose value changes."""
    lines = []
    for section, values in overrides.items():
        current = getattr(config, section)
        for key, value in values.items():
            old = getattr(current, key)
            if old != value:
                lines.append(f"{section}.{key}: {old} -> {value}")
    return lines


# -- command line ---------------------------------------------------------------------------------------------------
def add_tune_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="search the engines' threads, batch sizes and windows on this box; write the fastest config",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("edgevoice.toml"),
        help="config file to write: the current config with the tuned keys changed (default ./edgevoice.toml, "
        "which edgevoice reads from the working directory)",
    )
    p.add_argument("--report", type=Path, metavar="OUT", help="also write every trial as JSON to OUT")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result (chosen settings, changes, trials, GPU paths) as one JSON object on stdout",
    )
    p.add_argument("--quick", action="store_true", help="fewer repeats and candidates (a first look; tests)")
    p.add_argument(
        "--threads",
        type=_counts,
        metavar="N[,N...]",
        help="thread counts to try for every stage (default: 1, 2, 4, ... up to the number of cores)",
    )
    p.add_argument(
        "--n-batch",
        type=_counts,
        metavar="N[,N...]",
        help="llama.cpp batch sizes to try (default 64,128,256,512; with --quick 128,256)",
    )
    p.set_defaults(handler=_cmd_tune)


def _counts(text: str) -> tuple[int, ...]:
    """``"1,2"`` -> (1, 2): whole numbers of at least 1, for argparse."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers of at least 1, separated by commas, got {text!r}")
    return values


def _cmd_tune(args: argparse.Namespace) -> int:
    import json

    from edgevoice.cli_json import emit
    from edgevoice.config.file import write_config
    from edgevoice.config.load import find_config
    from edgevoice.models.configured import model_store
    from edgevoice.ownership import CONFIG_TOML, JSON_REPORT, check_output_path

    config = find_config(args.config)
    check_output_path(args.out, key="--out", kind=CONFIG_TOML)  # before the trials, not after
    if args.report:
        check_output_path(args.report, key="--report", kind=JSON_REPORT)
    options = TuneOptions.quick() if args.quick else TuneOptions()
    if args.threads:
        options = replace(options, threads=args.threads)
    if args.n_batch:
        options = replace(options, n_batch=args.n_batch)
    result = tune(config, model_store(config), options, progress=lambda m: print(f"... {m}", file=sys.stderr))
    base = None if config.source == "<defaults>" else config.source
    header = "Written by `edgevoice tune` (the fastest engine settings measured on this box" + (
        f"; everything else from {base})" if base else ")"
    )
    write_config(args.out, result.overrides, base=base, header=header)
    if args.report:
        args.report.write_text(json.dumps(result.as_dict(), indent=2) + "\n", encoding="utf-8")
    diff = changed(config, result.overrides)
    if args.json:
        emit(result.as_dict() | {"changed": diff, "out": str(args.out)})
        return 0
    print("\n".join(diff) if diff else "the current settings are already the fastest found")
    gpu = ", ".join(k for k, v in result.gpu.items() if v) or "none (CPU only)"
    print(f"GPU paths available: {gpu}")
    print(f"wrote {args.out}")
    return 0
