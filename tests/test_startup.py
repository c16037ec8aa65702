"""Start-up: the engines load side by side, and the prompt prefix's KV state is kept between starts (read back, it
answers exactly as the prefix evaluated; a file that does not read back is removed and the prefix evaluated)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from edgevoice.config import Config
from edgevoice.engines.llamacpp_state import PrefixStateFiles
from edgevoice.events import ChatMessage
from edgevoice.parallel_load import load_side_by_side

ROOT = Path(__file__).resolve().parent.parent
PREFIX = [ChatMessage("system", "You answer visitors of a small museum. Tickets cost 14 euros; students pay 9 euros.")]
QUESTION = ChatMessage("user", "How much is a ticket for a student?")


class Closable:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


# -- side by side ------------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_loads_run_side_by_side() -> None:
    both = threading.Barrier(2, timeout=10)  # passed only when the two loads run at the same time

    def load(name: str) -> str:
        both.wait()
        return name

    built, times = load_side_by_side({"a": lambda: load("a"), "b": lambda: load("b")})
    assert built == {"a": "a", "b": "b"}
    assert set(times) == {"a", "b"}


@pytest.mark.unit
def test_a_failed_load_closes_the_others_and_raises_the_first_named() -> None:
    later_failed = threading.Event()
    kept = Closable()

    def first() -> object:
        later_failed.wait(10)  # the later-named load fails first: the first-named failure is still the one raised
        raise ValueError("the first load's file is bad")

    def second() -> object:
        try:
            raise KeyError("second")
        finally:
            later_failed.set()

    with pytest.raises(ValueError, match="first load"):
        load_side_by_side({"first": first, "second": second, "third": lambda: kept})
    assert kept.closed


# -- the prefix's state on disk ----------------------------------------------------------------------------------------
@pytest.mark.unit
def test_a_state_is_named_for_its_model_settings_and_tokens(tmp_path: Path) -> None:
    one = PrefixStateFiles(tmp_path, "sha-a|n_ctx 2048")
    assert one.path([1, 2, 3]) == PrefixStateFiles(tmp_path, "sha-a|n_ctx 2048").path([1, 2, 3])
    assert one.path([1, 2, 3]) != one.path([1, 2, 4])
    assert one.path([1, 2, 3]) != PrefixStateFiles(tmp_path, "sha-b|n_ctx 2048").path([1, 2, 3])
    assert one.path([1, 2, 3]) != PrefixStateFiles(tmp_path, "sha-a|n_ctx 4096").path([1, 2, 3])


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CACHE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "edgevoice" / "prompts"


def reply(llm: object) -> str:
    return "".join(llm.stream_reply([*PREFIX, QUESTION], max_tokens=24))  # type: ignore[attr-defined]


@pytest.mark.models
def test_a_prefix_read_back_answers_as_the_prefix_evaluated(store, cache_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.app_engines import open_llm

    first = open_llm(Config(), store, keep_prefix=True)
    try:
        assert first.warm_prefix(PREFIX) == "evaluated"
        assert first.warm_prefix(PREFIX) == "cached"
        evaluated = reply(first)
    finally:
        first.close()
    assert len(list(cache_dir.glob("*.kvstate"))) == 1
    again = open_llm(Config(), store, keep_prefix=True)
    try:
        assert again.warm_prefix(PREFIX) == "restored"
        assert again.prefill(PREFIX) == 0  # the prefix is in the cache: nothing left to evaluate
        assert reply(again) == evaluated
        other = [ChatMessage("system", PREFIX[0].content + " The cafe opens at ten.")]
        assert again.warm_prefix(other) == "evaluated"  # the knowledge changed: its own state, evaluated
    finally:
        again.close()
    assert len(list(cache_dir.glob("*.kvstate"))) == 2


@pytest.mark.models
def test_a_state_that_does_not_read_back_is_removed_and_the_prefix_evaluated(  # type: ignore[no-untyped-def]
    store, cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from edgevoice.app_engines import open_llm

    llm = open_llm(Config(), store, keep_prefix=True)
    try:
        assert llm.warm_prefix(PREFIX) == "evaluated"
        evaluated = reply(llm)
    finally:
        llm.close()
    (state,) = cache_dir.glob("*.kvstate")
    state.write_bytes(state.read_bytes()[:1000])  # cut short, as by a full disk or a crash while copied
    again = open_llm(Config(), store, keep_prefix=True)
    try:
        with caplog.at_level(logging.WARNING):
            assert again.warm_prefix(PREFIX) == "evaluated"
        assert str(state) in caplog.text
        assert reply(again) == evaluated
    finally:
        again.close()
    assert state.stat().st_size > 1000  # written again whole


@pytest.mark.models
def test_converse_reads_the_prefix_back_on_its_second_run(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`edgevoice converse` twice with one cache: the second reads the prefix back and answers the same."""
    import os

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "EDGEVOICE_MODELS_DIR": str(store.models_dir)}
    env.pop("CACHE_DIRECTORY", None)
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "edgevoice", "converse", str(ROOT / "samples" / "question.wav"), "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert [r["prefix"] for r in runs] == ["evaluated", "restored"]
    assert runs[0]["reply"] == runs[1]["reply"]
    assert runs[0]["transcript"] == runs[1]["transcript"]
    assert {"vad", "asr", "llm", "tts", "kiosk"} <= set(runs[1]["load_ms"])


# -- the ready record --------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_the_ready_record_names_each_load_and_warm_up_step_and_how_the_prefix_came() -> None:
    from types import SimpleNamespace

    from edgevoice.run import ready_record

    models = SimpleNamespace(load_s={"vad": 0.1, "llm": 1.25, "kiosk": 0.3})
    appliance = SimpleNamespace(
        startup_s={"assistant": 0.002, "warm_prefix": 0.011, "warm_asr": 0.2, "warm_tts": 0.07},
        assistant=SimpleNamespace(prefix_warmed="restored"),
    )
    stages = {"models": 1300, "appliance": 400, "streams": 180}
    record = ready_record(1880, stages, models, appliance)  # type: ignore[arg-type]
    assert record == {
        "event": "ready",
        "load_ms": 1880,
        "stages_ms": stages,
        "steps_ms": {
            "load_vad": 100,
            "load_llm": 1250,
            "load_kiosk": 300,
            "assistant": 2,
            "warm_prefix": 11,
            "warm_asr": 200,
            "warm_tts": 70,
        },
        "prefix": "restored",
    }


@pytest.mark.unit
def test_with_no_model_installed_the_first_named_load_reports_its_file_and_checksum() -> None:
    """Every engine fails on its own thread (the unit tier's models directory is empty); the error reported is the
    voice activity detector's, named first, whichever thread failed first: the file and its sha256."""
    from edgevoice.app import load_engines
    from edgevoice.errors import ModelMissingError

    for _ in range(3):
        with pytest.raises(ModelMissingError) as raised:
            load_engines(Config())
        assert "silero_vad.onnx" in str(raised.value) and "sha256" in str(raised.value)
