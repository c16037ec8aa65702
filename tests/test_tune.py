"""`edgevoice tune` on the real engines (quick search): it writes a config that loads, with values it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgevoice.bench.cli import parse_variant
from edgevoice.bench.tune import TuneOptions, best, thread_choices, tune
from edgevoice.config import Config
from edgevoice.config.load import load_config
from edgevoice.errors import ConfigError


def test_thread_choices_cover_powers_of_two_and_every_core() -> None:
    assert thread_choices(1) == (1,)
    assert thread_choices(2) == (1, 2)
    assert thread_choices(6) == (1, 2, 4, 6)
    assert thread_choices(8) == (1, 2, 4, 8)


def test_best_ignores_rows_without_a_measurement() -> None:
    rows = [{"x": None, "n": 1}, {"x": 3.0, "n": 2}, {"x": 2.0, "n": 4}]
    assert best(rows, "x")["n"] == 4


def test_compare_variants_parse_toml_values() -> None:
    v = parse_variant("llm.threads=1,asr.audio_ctx=1500,tts.provider=cuda,audio.echo_cancellation=false")
    assert v.overrides == {
        "llm": {"threads": 1},
        "asr": {"audio_ctx": 1500},
        "tts": {"provider": "cuda"},
        "audio": {"echo_cancellation": False},
    }
    with pytest.raises(ConfigError):
        parse_variant("threads=1")


def test_tune_keeps_what_it_measured_fastest_on_each_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search itself, with each stage's measurement replaced by a table: every choice is the fastest row, and
    recognition only among the settings as accurate as the best."""
    from edgevoice.bench import engines
    from edgevoice.bench import tune as tune_module
    from edgevoice.engines import onnx_session

    asr = {(1, 0): (90.0, 0.1), (1, 1500): (300.0, 0.1), (2, 0): (60.0, 0.1), (2, 1500): (40.0, 0.3)}
    llm_first_clause = {(1, 0): 900.0, (1, -1): 400.0, (2, 0): 700.0, (2, -1): 300.0}
    prefill = {64: 90.0, 128: 150.0, 256: 120.0}
    tts = {(1, "cpu"): 80.0, (1, "cuda"): 30.0, (2, "cpu"): 50.0, (2, "cuda"): 35.0}
    vad = {1: (0.2, 12.0), 2: (0.3, 30.0)}  # per frame, Smart Turn per verdict: 0.6 against 1.3 a frame

    def measure_asr(_rec: object, _clips: object, threads: int, ctx: int, _repeats: int) -> dict[str, object]:
        ms, wer = asr[(threads, ctx)]
        return {"threads": threads, "audio_ctx": ctx or "auto", "ms_per_utterance": ms, "wer": wer}

    def measure_llm(_c: object, _s: object, *, threads: int, n_batch: int, n_gpu_layers: int, **_: object) -> dict:
        first = llm_first_clause[(threads, n_gpu_layers)] if n_batch == 256 else 999.0
        row = {"threads": threads, "n_batch": n_batch, "n_gpu_layers": n_gpu_layers, "first_clause_ms": first}
        return row | {"prompt_tokens_per_s": prefill[n_batch]}

    def measure_tts(_c: object, _s: object, *, threads: int, provider: str, repeats: int) -> dict[str, object]:
        return {"threads": threads, "provider": provider, "first_audio_ms": tts[(threads, provider)]}

    def measure_vad(_c: object, _s: object, *, threads: int, repeats: int) -> dict[str, object]:
        frame, turn = vad[threads]
        return {"threads": threads, "vad_ms_per_frame": frame, "smart_turn_ms": turn}

    class Recognizer:
        def close(self) -> None:
            pass

    monkeypatch.setattr(engines, "measure_asr", measure_asr)
    monkeypatch.setattr(engines, "measure_llm", measure_llm)
    monkeypatch.setattr(engines, "measure_tts", measure_tts)
    monkeypatch.setattr(engines, "measure_vad", measure_vad)
    monkeypatch.setattr(engines, "open_recognizer", lambda _c, _s: Recognizer())
    monkeypatch.setattr(engines, "spoken_clips", lambda _n: [])
    monkeypatch.setattr(tune_module, "gpu_offload", lambda: True)
    monkeypatch.setattr(onnx_session, "available_providers", lambda: ["cuda", "cpu"])
    options = TuneOptions(repeats=1, utterances=1, threads=(1, 2), n_batch=(64, 128, 256), audio_ctx=(0, 1500))
    result = tune(Config(), None, options)  # type: ignore[arg-type]  # the fakes never read the store

    assert result.overrides == {
        "asr": {"threads": 2, "audio_ctx": 0},  # 40 ms at 1500 is faster, but mishears
        "llm": {"threads": 2, "n_batch": 128, "n_gpu_layers": -1},  # first clause, then prefill at that setting
        "tts": {"threads": 1, "provider": "cuda"},
        "vad": {"threads": 1},
    }
    assert len(result.trials["asr"]) == 4 and len(result.trials["llm"]) == 4 + 2  # 256 is measured once
    assert result.gpu == {"llama_cpp": True, "onnxruntime_cuda": True}


@pytest.mark.models
@pytest.mark.slow
def test_tune_writes_a_config_that_loads_with_measured_settings(tmp_path: Path) -> None:
    """The command on the real engines, one trial per stage (the choice among trials is checked above)."""
    base = tmp_path / "edgevoice.toml"
    base.write_text('[kiosk]\nname = "Zoe"\n\n[llm]\nthreads = 2\n', encoding="utf-8")
    out, trials = tmp_path / "tuned.toml", tmp_path / "trials.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "edgevoice", "tune", "--quick", "--threads", "1", "--n-batch", "256"),
            *("--config", str(base), "--out", str(out), "--report", str(trials)),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = load_config(out)  # it loads
    assert config.kiosk.name == "Zoe"  # the rest of the box's config is kept
    assert (config.asr.threads, config.llm.threads, config.tts.threads, config.vad.threads) == (1, 1, 1, 1)
    assert config.llm.n_batch == 256 and config.asr.audio_ctx == 0
    assert config.tts.provider == "cpu" and config.llm.n_gpu_layers == 0  # no GPU here: CPU paths
    data = json.loads(trials.read_text())
    assert data["gpu"] == {"llama_cpp": False, "onnxruntime_cuda": False}
    [asr], [llm], [tts], [vad] = (data["trials"][stage] for stage in ("asr", "llm", "tts", "vad"))
    assert asr["ms_per_utterance"] > 0 and asr["wer"] <= 0.2  # measured on a real utterance
    assert llm["first_clause_ms"] > 0 and llm["prompt_tokens_per_s"] > 0
    assert tts["first_audio_ms"] > 0 and vad["vad_ms_per_frame"] > 0
    assert "llm.threads: 2 -> 1" in proc.stdout and f"wrote {out}" in proc.stdout


def test_tune_refuses_a_thread_count_below_one() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "edgevoice", "tune", "--threads", "0,2"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "--threads: expected whole numbers of at least 1" in proc.stderr
