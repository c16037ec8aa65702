"""`edgevoice tune` on the real engines (quick search): it writes a config that loads, with values it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgevoice.bench.cli import parse_variant
from edgevoice.bench.tune import TuneOptions, best, thread_choices
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


@pytest.mark.models
@pytest.mark.slow
def test_tune_writes_a_config_that_loads_with_measured_settings(tmp_path: Path) -> None:
    base = tmp_path / "edgevoice.toml"
    base.write_text('[kiosk]\nname = "Zoe"\n\n[llm]\nthreads = 1\n', encoding="utf-8")
    out, trials = tmp_path / "tuned.toml", tmp_path / "trials.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "edgevoice", "tune", "--quick", "--config", str(base)),
            *("--out", str(out), "--report", str(trials)),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = load_config(out)  # it loads
    assert config.kiosk.name == "Zoe"  # the rest of the box's config is kept
    quick = TuneOptions.quick()
    assert config.asr.threads in quick.threads and config.llm.threads in quick.threads
    assert config.llm.n_batch in quick.n_batch and config.tts.threads in quick.threads
    assert config.tts.provider == "cpu" and config.llm.n_gpu_layers == 0  # no GPU here: CPU paths
    data = json.loads(trials.read_text())
    assert data["gpu"] == {"llama_cpp": False, "onnxruntime_cuda": False}
    chosen_llm = [r for r in data["trials"]["llm"] if r["threads"] == config.llm.threads]
    assert chosen_llm and all(r["first_clause_ms"] > 0 for r in data["trials"]["llm"])
    # what it chose is what it measured fastest
    asr = min(data["trials"]["asr"], key=lambda r: r["ms_per_utterance"])
    assert config.asr.threads == asr["threads"]
    assert f"wrote {out}" in proc.stdout
