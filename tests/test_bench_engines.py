"""`edgevoice bench` (engines, quick): every stage measured on the real engines, with plausible numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.models, pytest.mark.slow]


def test_engine_benchmarks_report_every_stage(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "edgevoice", "bench", "--quick", "--report", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())["engines"]
    asr = {r["audio_ctx"]: r for r in data["asr"]}
    assert asr["auto"]["wer"] <= 0.1 and asr[1500]["wer"] <= 0.1
    # a window sized to the utterance is the point of audio_ctx: faster than Whisper's whole 30 s window
    assert asr["auto"]["ms_per_utterance"] < asr[1500]["ms_per_utterance"]
    assert 0 < asr["auto"]["rtf"] < 1
    (llm,) = data["llm"]
    assert llm["prefix_tokens"] > 100
    assert llm["ttft_cached_ms"] < llm["ttft_cold_ms"]  # the cached prefix is what makes the first token fast
    assert llm["generation_tokens_per_s"] > 1 and llm["prompt_tokens_per_s"] > 1
    (tts,) = data["tts"]
    assert 0 < tts["first_audio_ms"] < 5000 and 0 < tts["rtf"] < 1
    assert 0 < data["vad"]["vad_ms_per_frame"] < 32
    assert "recognition (whisper.cpp)" in proc.stdout and "language model (llama.cpp)" in proc.stdout
