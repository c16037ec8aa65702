"""One exception hierarchy for edgevoice, with stable machine-readable codes.

Every error raised on purpose by edgevoice is an :class:`EdgeVoiceError`. Its ``code`` is stable across releases
(scripts, the journal and the self-test key on it); its message is for people. Unexpected errors from an engine are
wrapped with ``raise StageError(...) from exc`` so the original traceback survives.
"""

from __future__ import annotations

from typing import Any


class EdgeVoiceError(Exception):
    """Base of every edgevoice error."""

    code: str = "edgevoice_error"
    stage: str | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def as_json(self) -> dict[str, Any]:
        """The error as ``--json`` prints it: ``code`` and ``message``."""
        return {"code": self.code, "message": self.message}


class ConfigError(EdgeVoiceError):
    """A configuration value is missing, of the wrong type or out of range."""

    code = "config_invalid"

    def __init__(self, message: str, *, code: str | None = None, key: str | None = None) -> None:
        super().__init__(message, code=code)
        self.key = key

    def as_json(self) -> dict[str, Any]:
        """With the ``key`` the error is about, where it is one key's."""
        return super().as_json() | ({"key": self.key} if self.key is not None else {})


class ConfigErrors(ConfigError):
    """Every error found in one configuration file, in the order of the file: each value's type and range, unknown
    keys, and the rules between keys of a table."""

    def __init__(self, errors: list[ConfigError], source: str) -> None:
        lines = "".join(f"\n  {e.message}" for e in errors)
        super().__init__(f"{len(errors)} errors in {source}:{lines}")
        self.errors = errors

    def as_json(self) -> dict[str, Any]:
        """With each error under ``errors``."""
        return super().as_json() | {"errors": [e.as_json() for e in self.errors]}


class ModelError(EdgeVoiceError):
    """A model file is missing, corrupt, of the wrong format or fails its checksum."""

    code = "model_error"


class ModelMissingError(ModelError):
    code = "model_missing"


class ModelChecksumError(ModelError):
    code = "model_checksum"


class ModelFormatError(ModelError):
    code = "model_format"


class ModelInstallError(ModelError):
    code = "model_install"


class AudioInputError(EdgeVoiceError):
    """Input audio cannot be read or decoded."""

    code = "audio_input"
    stage = "input"


class AudioDeviceError(EdgeVoiceError):
    """A sound device cannot be found or opened, or stopped working (unplugged, sound server gone)."""

    code = "audio_device"


class SelftestError(EdgeVoiceError):
    """The self-test could not run the appliance or measure it (not: the appliance was too slow)."""

    code = "selftest_failed"


class StageError(EdgeVoiceError):
    """An engine failed while running a stage (vad, turn, asr, llm, tts)."""

    code = "stage_failed"

    def __init__(self, stage: str, message: str, *, code: str | None = None) -> None:
        super().__init__(f"{stage}: {message}", code=code)
        self.stage = stage


class VadError(StageError):
    code = "vad_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__("vad", message, code=code)


class TurnError(StageError):
    code = "turn_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__("turn", message, code=code)


class RecognizerError(StageError):
    code = "asr_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__("asr", message, code=code)


class LanguageModelError(StageError):
    code = "llm_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__("llm", message, code=code)


class SynthesizerError(StageError):
    code = "tts_failed"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__("tts", message, code=code)
