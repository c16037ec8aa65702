"""`edgevoice bench` (engines): every stage's variants measured, compared with the fastest, reported and printed.

The measurements here are a table; their figures on the real engines are the benchmark's, run by hand
(``edgevoice bench``, docs/measuring.md) and written into docs/decisions/. The measuring functions themselves run
on the real engines in ``tests/test_tune.py`` (one trial of each stage).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edgevoice.bench import engines

ASR_MS = {0: 210.0, 1500: 630.0}
"""Time per utterance by ``audio_ctx`` (0: sized to the utterance)."""


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each stage's measurement replaced by a table; returns the stages in the order they were measured."""
    order: list[str] = []

    def measure_asr(_rec: object, _clips: object, threads: int, ctx: int, repeats: int) -> dict[str, Any]:
        order.append("asr")
        return {"threads": threads, "audio_ctx": ctx or "auto", "ms_per_utterance": ASR_MS[ctx], "wer": 0.0}

    def measure_llm(_c: object, _s: object, *, threads: int, n_batch: int, **_: object) -> dict[str, Any]:
        order.append("llm")
        times = {"ttft_cached_ms": 150.0, "ttft_cold_ms": 1300.0, "generation_tokens_per_s": 24.0}
        return {"threads": threads, "n_batch": n_batch, "first_clause_ms": 420.0} | times

    def measure_tts(_c: object, _s: object, *, threads: int, provider: str, repeats: int) -> dict[str, Any]:
        order.append("tts")
        return {"threads": threads, "provider": provider, "first_audio_ms": 180.0, "rtf": 0.05}

    def measure_vad(_c: object, _s: object, *, threads: int, repeats: int) -> dict[str, Any]:
        order.append("vad")
        return {"threads": threads, "vad_ms_per_frame": 0.1, "smart_turn_ms": 12.0}

    class Recognizer:
        def close(self) -> None:
            order.append("asr closed")

    monkeypatch.setattr(engines, "measure_asr", measure_asr)
    monkeypatch.setattr(engines, "measure_llm", measure_llm)
    monkeypatch.setattr(engines, "measure_tts", measure_tts)
    monkeypatch.setattr(engines, "measure_vad", measure_vad)
    monkeypatch.setattr(engines, "open_recognizer", lambda _c, _s: Recognizer())
    monkeypatch.setattr(engines, "spoken_clips", lambda _n: [])
    return order


def test_engine_benchmarks_report_every_stage(
    measured: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgevoice.cli import main

    monkeypatch.chdir(tmp_path)  # no ./edgevoice.toml: the defaults
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--report", str(out)]) == 0
    assert measured == ["asr", "asr", "asr closed", "llm", "tts", "vad"]  # quick: two windows, one of the rest
    data = json.loads(out.read_text())["engines"]
    asr = {r["audio_ctx"]: r for r in data["asr"]}
    assert (asr["auto"]["ratio"], asr[1500]["ratio"]) == (1.0, 3.0)  # each against the fastest
    [llm], [tts] = data["llm"], data["tts"]
    assert (llm["threads"], llm["ratio"], tts["first_audio_ms"]) == (2, 1.0, 180.0)
    assert data["vad"]["smart_turn_ms"] == 12.0
    printed = capsys.readouterr().out
    assert "recognition (whisper.cpp)" in printed and "language model (llama.cpp)" in printed
    assert "Smart Turn 12.0 ms per verdict" in printed
