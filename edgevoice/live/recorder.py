"""The opt-in debug recorder: the audio and record of the last few turns, for diagnosing a kiosk in the field.

By default edgevoice writes no audio to disk at all (``[debug] record_turns = 0``). With ``record_turns = N`` each
finished turn leaves two files in the recorder's directory, and only the newest N turns are kept:

    000042-turn7.wav     what the listener heard for that turn (16 kHz mono, 16-bit)
    000042-turn7.json    the turn's record (transcript, reply, stage times: what `edgevoice run --json` prints)

The numbers run on across restarts, so the oldest turn is always the one deleted. Files are written to a temporary
name and renamed (a crash leaves no half file behind), readable by their owner only. A full or read-only disk costs
the recording, never the turn: errors are logged and the loop goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import soundfile

from edgevoice.atomic_write import replacing
from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import ConfigError
from edgevoice.interfaces import FloatAudio

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{6,})-turn\d+\.(wav|json)$")
_TEMP = re.compile(r"^\.\d{6,}-turn\d+\.(wav|json)\.")


def default_debug_dir() -> Path:
    """``$STATE_DIRECTORY`` (the service's ``StateDirectory=``), else ``$XDG_STATE_HOME/edgevoice/turns``
    (``~/.local/state/edgevoice/turns``)."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    if state:
        return Path(state)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "edgevoice" / "turns"


def check_record_dir(directory: Path) -> None:
    """Refuse a directory that holds anything but the recorder's own files: the recorder deletes old turns there, so
    it must be one of its own (``record_dir = "/etc"`` is a mistake, never a place to write audio)."""
    try:
        names = [path.name for path in Path(directory).iterdir()]
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"debug.record_dir = {str(directory)!r}: cannot list it ({exc.strerror})") from exc
    foreign = sorted(name for name in names if not _NAME.match(name) and not _TEMP.match(name))
    if foreign:
        raise ConfigError(
            f"debug.record_dir = {str(directory)!r}: holds files that are not the debug recorder's "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); name an empty or new directory"
        )


class TurnRecorder:
    """Keeps the newest ``keep`` turns (audio + record) in ``directory``."""

    def __init__(self, directory: Path, keep: int, *, rate: int = SAMPLE_RATE) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.directory = Path(directory)
        self.keep = keep
        self.rate = rate
        self.failures = 0
        self._next = self._last_sequence() + 1

    @classmethod
    def from_config(cls, record_turns: int, record_dir: str, *, rate: int = SAMPLE_RATE) -> TurnRecorder | None:
        """The recorder the ``[debug]`` section asks for; None when recording is off (the default)."""
        if record_turns <= 0:
            return None
        directory = Path(record_dir).expanduser() if record_dir else default_debug_dir()
        check_record_dir(directory)
        log.warning("debug recorder on: the last %d turns' audio is kept in %s", record_turns, directory)
        return cls(directory, record_turns, rate=rate)

    def _sequences(self) -> dict[int, list[Path]]:
        found: dict[int, list[Path]] = {}
        with contextlib.suppress(OSError):  # missing or unreadable: nothing kept
            for path in self.directory.iterdir():
                m = _NAME.match(path.name)
                if m:
                    found.setdefault(int(m.group(1)), []).append(path)
        return found

    def _last_sequence(self) -> int:
        return max(self._sequences(), default=0)

    def record(self, turn_id: int, audio: FloatAudio, record: Mapping[str, object]) -> Path | None:
        """Write one turn and delete the oldest beyond ``keep``; returns the audio file, None if it failed."""
        stem = f"{self._next:06d}-turn{turn_id}"
        self._next += 1
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            wav = self.directory / f"{stem}.wav"
            pcm = np.clip(np.nan_to_num(np.asarray(audio, dtype=np.float32)), -1.0, 1.0)
            self._write(wav, lambda path: soundfile.write(path, pcm, self.rate, subtype="PCM_16", format="WAV"))
            body = json.dumps(dict(record), ensure_ascii=False, indent=1, default=str).encode()
            self._write(self.directory / f"{stem}.json", lambda path: Path(path).write_bytes(body))
        except (OSError, soundfile.SoundFileError) as exc:  # disk full, read-only, gone: the turn is not affected
            self.failures += 1
            log.warning("debug recorder: cannot write turn %d to %s: %s", turn_id, self.directory, exc)
            self._prune(keep=self.keep)
            return None
        self._prune(keep=self.keep)
        return wav

    def _write(self, target: Path, write: object) -> None:
        with replacing(target, mode=0o600) as tmp:
            write(str(tmp))  # type: ignore[operator]

    def _prune(self, keep: int) -> None:
        sequences = self._sequences()
        for seq in sorted(sequences)[: max(0, len(sequences) - keep)]:
            for path in sequences[seq]:
                try:
                    path.unlink()
                except OSError as exc:
                    log.warning("debug recorder: cannot delete %s: %s", path, exc)

    def turns(self) -> list[str]:
        """The names (without suffix) of the turns kept, oldest first."""
        sequences = self._sequences()
        return [min(sequences[seq]).stem for seq in sorted(sequences)]
