"""Writing config files: the base file's keys kept, the overrides applied, nothing written that would not load."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgevoice.config.file import write_config
from edgevoice.config.load import load_config
from edgevoice.errors import ConfigError


def test_overrides_are_applied_and_the_base_files_other_keys_kept(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('[kiosk]\nname = "Zoe"\n\n[llm]\nthreads = 1\nmax_tokens = 40\n', encoding="utf-8")
    out = tmp_path / "tuned.toml"
    config = write_config(out, {"llm": {"threads": 2, "n_batch": 128}, "asr": {"audio_ctx": 0}}, base=base,
                          header="tuned\nby a test")  # fmt: skip
    assert config.kiosk.name == "Zoe" and config.llm.max_tokens == 40
    assert (config.llm.threads, config.llm.n_batch, config.asr.audio_ctx) == (2, 128, 0)
    assert load_config(out) == config
    assert out.read_text(encoding="utf-8").startswith("# tuned\n# by a test\n")
    assert "threads = 1" in base.read_text(encoding="utf-8")  # the base file is untouched


def test_an_invalid_value_is_refused_and_the_existing_file_survives(tmp_path: Path) -> None:
    out = tmp_path / "edgevoice.toml"
    write_config(out, {"llm": {"threads": 2}})
    before = out.read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match=r"llm\.threads"):
        write_config(out, {"llm": {"threads": 0}})
    assert out.read_text(encoding="utf-8") == before
    assert [p.name for p in tmp_path.iterdir()] == ["edgevoice.toml"]  # no temporary file left behind
