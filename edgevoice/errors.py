"""One exception hierarchy for edgevoice, with stable machine-readable codes.

Every error raised on purpose by edgevoice is an :class:`EdgeVoiceError`. Its ``code`` is stable across releases
(scripts, the journal and the self-test key on it); its message is for people. Unexpected errors from an engine are
wrapped with ``raise StageError(...) from exc`` so the original traceback survives.

:data:`ERROR_CODES` lists every code with the exit status a command ends with when the error stops it, and what the
code means; docs/cli.md's table is tested against it (tests/test_error_codes.py). A new code is one line there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

EXIT_OK = 0
EXIT_NO = 1
"""Done, and the answer is "no": only `selftest` (over its budget), whose job is to answer a yes/no question."""
EXIT_ERROR = 2
"""An error that trying again will not mend (a bad configuration or model, unreadable input, a usage error). The
service's unit does not restart on it (``RestartPreventExitStatus=2``)."""
EXIT_UNAVAILABLE = 69
"""EX_UNAVAILABLE: something outside edgevoice is not there yet (a sound device: a USB microphone enumerating, the
sound server starting); the unit restarts the service, within its start limit."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""
EXIT_BROKEN_PIPE = 141
"""stdout was closed by its reader (``edgevoice models list | head -1``): 128 + SIGPIPE, as a shell reports a
command that SIGPIPE ended."""


class ErrorCode(NamedTuple):
    """What one error code means, and the exit status of a command that it stops."""

    status: int
    meaning: str


ERROR_CODES: dict[str, ErrorCode] = {
    "activation_gpio": ErrorCode(EXIT_ERROR, "`[activation] gpio_chip` or its line cannot be opened or read"),
    "activation_socket": ErrorCode(EXIT_ERROR, "the trigger socket cannot be bound, or `trigger` cannot reach it"),
    "admin_cross_site": ErrorCode(EXIT_ERROR, "admin page: a change sent by a page of another site (HTTP 403)"),
    "admin_host_invalid": ErrorCode(EXIT_ERROR, "admin page: not exactly one well-formed `Host` (HTTP 400)"),
    "admin_host_not_served": ErrorCode(EXIT_ERROR, "admin page: the `Host` is not a name it serves (HTTP 421)"),
    "admin_internal": ErrorCode(EXIT_ERROR, "admin page: an unexpected error, logged with its traceback (HTTP 500)"),
    "admin_method_not_allowed": ErrorCode(EXIT_ERROR, "admin page: the route does not take this method (HTTP 405)"),
    "admin_not_found": ErrorCode(EXIT_ERROR, "admin page: no such route (HTTP 404)"),
    "admin_token_needed": ErrorCode(EXIT_ERROR, "admin page: no token, or the wrong one (HTTP 401)"),
    "admin_too_large": ErrorCode(EXIT_ERROR, "admin page: the knowledge sent is larger than it reads (HTTP 413)"),
    "aec_closed": ErrorCode(EXIT_ERROR, "the echo canceller was used after it was closed"),
    "aec_failed": ErrorCode(EXIT_ERROR, "WebRTC echo cancellation failed on a frame"),
    "aec_rate": ErrorCode(EXIT_ERROR, "echo cancellation does not run at the device's sample rate"),
    "aec_unavailable": ErrorCode(EXIT_ERROR, "echo cancellation needs the livekit package, which is not installed"),
    "asr_failed": ErrorCode(EXIT_ERROR, "the recognizer (whisper.cpp) failed"),
    "audio_bad_header": ErrorCode(
        EXIT_ERROR, "an input WAV file's header cannot describe audio (the message says why)"
    ),
    "audio_device": ErrorCode(EXIT_UNAVAILABLE, "no sound device, or one that cannot be opened or stopped working"),
    "audio_device_missing": ErrorCode(EXIT_UNAVAILABLE, "`[audio] input_device`/`output_device` matches no device"),
    "audio_input": ErrorCode(EXIT_ERROR, "an input audio file cannot be read or decoded"),
    "audio_missing": ErrorCode(EXIT_ERROR, "an input audio file does not exist"),
    "audio_rate": ErrorCode(EXIT_ERROR, "an input audio file's sample rate is outside what is accepted"),
    "audio_unreadable": ErrorCode(EXIT_ERROR, "an input audio file is not a readable audio file"),
    "bus_full": ErrorCode(EXIT_ERROR, "the live loop's event bus has as many subscribers as it takes"),
    "compile_missing": ErrorCode(EXIT_ERROR, "`bench --compiled`: a venue's knowledge has no finished compile"),
    "compile_no_model": ErrorCode(
        EXIT_UNAVAILABLE, "`knowledge compile`: no model to compile with (the compile model, or [llm] backend = openai)"
    ),
    "config_invalid": ErrorCode(EXIT_ERROR, "a configuration value is unknown, of the wrong type or out of range"),
    "display_bad_request": ErrorCode(
        EXIT_ERROR, "a request to the display's talk button is not an action it takes (HTTP 400)"
    ),
    "display_full": ErrorCode(
        EXIT_ERROR, "as many pages follow the display as `[display] max_clients` allows (HTTP 503)"
    ),
    "display_method_not_allowed": ErrorCode(EXIT_ERROR, "the display's event stream takes GET only (HTTP 405)"),
    "display_no_button": ErrorCode(
        EXIT_ERROR, "the activation mode is `always`: the display has no talk button (HTTP 409)"
    ),
    "display_not_found": ErrorCode(EXIT_ERROR, "no such file in the display's page (HTTP 404)"),
    "edgevoice_error": ErrorCode(EXIT_ERROR, "an error without a code of its own"),
    "fault_injection": ErrorCode(EXIT_ERROR, "a test-only fault-injection setting cannot be parsed"),
    "injected_fault": ErrorCode(EXIT_ERROR, "a fault injected on purpose by a test"),
    "kiosk_busy": ErrorCode(EXIT_ERROR, "a reply did not end in time, so the knowledge was not reloaded"),
    "knowledge_binary": ErrorCode(EXIT_ERROR, "the knowledge holds control characters or NUL bytes: binary, not text"),
    "knowledge_changed_meanwhile": ErrorCode(
        EXIT_ERROR, "a knowledge save was made to a version of the file that another save replaced meanwhile"
    ),
    "knowledge_edit_failed": ErrorCode(
        EXIT_ERROR, "a way of asking or an entry could not be written so that the knowledge reads back the same"
    ),
    "knowledge_edit_instruction": ErrorCode(
        EXIT_ERROR, "a question or answer to write into the knowledge addresses the assistant"
    ),
    "knowledge_edit_invalid": ErrorCode(
        EXIT_ERROR, "a question or answer to write into the knowledge is empty, too long or holds control characters"
    ),
    "knowledge_entry_changed": ErrorCode(EXIT_ERROR, "no knowledge entry is the one named: it was edited meanwhile"),
    "knowledge_entry_too_long": ErrorCode(EXIT_ERROR, "a knowledge entry is longer than a fact can be"),
    "knowledge_not_a_file": ErrorCode(EXIT_ERROR, "the knowledge file is a directory, FIFO or device"),
    "knowledge_not_editable": ErrorCode(EXIT_ERROR, "the knowledge is inline in the configuration (HTTP 409)"),
    "knowledge_not_restored": ErrorCode(EXIT_ERROR, "a refused knowledge save could not put the previous file back"),
    "knowledge_not_text": ErrorCode(
        EXIT_ERROR, "under half of the knowledge's words are words or numbers: not written for people"
    ),
    "knowledge_not_utf8": ErrorCode(EXIT_ERROR, "the knowledge is not UTF-8 text (the message names line and byte)"),
    "knowledge_system_file": ErrorCode(EXIT_ERROR, "the knowledge file lies under a system directory"),
    "llm_context_full": ErrorCode(EXIT_ERROR, "the prompt does not fit the language model's context (`[llm] n_ctx`)"),
    "llm_failed": ErrorCode(EXIT_ERROR, "the language model failed"),
    "llm_interrupted": ErrorCode(EXIT_ERROR, "a reply was cut short because the model is shutting down or cancelled"),
    "llm_remote_failed": ErrorCode(EXIT_ERROR, "the remote model's connection broke, or its stream ended too soon"),
    "llm_remote_http": ErrorCode(EXIT_ERROR, "the remote model answered with an HTTP error or an error event"),
    "llm_remote_malformed": ErrorCode(EXIT_ERROR, "the remote model's stream was not OpenAI chat chunks"),
    "llm_remote_oversized": ErrorCode(EXIT_ERROR, "a remote line or reply longer than `max_tokens` allows"),
    "llm_remote_stalled": ErrorCode(EXIT_ERROR, "the remote model sent nothing for longer than `llm.remote_stall_s`"),
    "llm_remote_unreachable": ErrorCode(EXIT_ERROR, "the remote model refused the connection or was not reached"),
    "model_checksum": ErrorCode(EXIT_ERROR, "a model file does not match its pinned sha256"),
    "model_error": ErrorCode(EXIT_ERROR, "a model file cannot be used"),
    "model_format": ErrorCode(EXIT_ERROR, "a model file is not of the format its role needs, or is truncated"),
    "model_install": ErrorCode(EXIT_ERROR, "a model could not be downloaded, assembled or installed"),
    "model_missing": ErrorCode(EXIT_ERROR, "a model is not installed (the message names the install command)"),
    "output_path": ErrorCode(EXIT_ERROR, "an output file cannot be written there, or is not edgevoice's to replace"),
    "path_not_ours": ErrorCode(
        EXIT_ERROR, "a socket or file the service would create holds something that is not its own; it is left alone"
    ),
    "review_gone": ErrorCode(EXIT_ERROR, "admin page: the review item is no longer in the inbox (HTTP 404)"),
    "review_invalid": ErrorCode(EXIT_ERROR, "admin page: a review action's question or answer is empty or too long"),
    "review_off": ErrorCode(EXIT_ERROR, "admin page: the review inbox is off (`[review] enabled`; HTTP 409)"),
    "review_unavailable": ErrorCode(EXIT_ERROR, "the review inbox's directory cannot be made (`[review] dir`)"),
    "ring_closed": ErrorCode(EXIT_ERROR, "a shared-memory audio ring was used after it was closed"),
    "ring_exists": ErrorCode(EXIT_ERROR, "a shared-memory audio ring of that name already exists"),
    "ring_format": ErrorCode(EXIT_ERROR, "a shared-memory block is not an edgevoice audio ring"),
    "ring_invalid": ErrorCode(EXIT_ERROR, "an audio ring was asked for more frames than it can ever hold"),
    "ring_missing": ErrorCode(EXIT_ERROR, "no shared-memory audio ring of that name"),
    "ring_no_atomics": ErrorCode(EXIT_ERROR, "this CPU needs libatomic.so.1 for the audio ring, and it is missing"),
    "ring_not_owner": ErrorCode(EXIT_ERROR, "an audio ring's writer side was used by a handle that does not own it"),
    "ring_shape": ErrorCode(EXIT_ERROR, "frames of the wrong shape or type for an audio ring"),
    "selftest_failed": ErrorCode(EXIT_ERROR, "the self-test could not run or measure the appliance"),
    "selftest_running": ErrorCode(EXIT_ERROR, "a self-test is running; one runs at a time (HTTP 409)"),
    "stage_failed": ErrorCode(EXIT_ERROR, "an engine failed while running a stage"),
    "stage_unexpected": ErrorCode(EXIT_ERROR, "an unexpected exception in a stage (a bug: the message names it)"),
    "trigger_unavailable": ErrorCode(EXIT_ERROR, "the activation mode takes no trigger (HTTP 409)"),
    "tts_failed": ErrorCode(EXIT_ERROR, "the synthesizer (Piper) failed"),
    "turn_failed": ErrorCode(EXIT_ERROR, "the end-of-turn model failed"),
    "turn_probability_invalid": ErrorCode(EXIT_ERROR, "the end-of-turn model gave a probability outside [0, 1]"),
    "usage": ErrorCode(EXIT_ERROR, "the command line is not one the command takes (its usage follows the message)"),
    "vad_failed": ErrorCode(EXIT_ERROR, "the voice-activity detector (Silero) failed"),
    "vad_frame": ErrorCode(EXIT_ERROR, "a frame of the wrong size was given to the voice-activity detector"),
    "vad_rate": ErrorCode(EXIT_ERROR, "the voice-activity detector does not run at that sample rate"),
    "wake_word_model": ErrorCode(EXIT_ERROR, "`[activation] wake_word` names a model that cannot be loaded"),
    "wyoming_bad_audio": ErrorCode(
        EXIT_ERROR,
        "Wyoming server: audio not 16-bit PCM, 1 or 2 channels, 8 to 48 kHz, or its format changed mid-stream",
    ),
    "wyoming_bad_event": ErrorCode(
        EXIT_ERROR, "Wyoming server: an event not in the protocol's form, or out of order (audio before its start)"
    ),
    "wyoming_busy": ErrorCode(
        EXIT_ERROR, "Wyoming server: `[wyoming] max_clients` are served, or texts wait to be said on the kiosk already"
    ),
    "wyoming_off": ErrorCode(
        EXIT_ERROR, "Wyoming server: the voice `kiosk` was asked with `[wyoming] speak_on_kiosk` off"
    ),
    "wyoming_too_large": ErrorCode(
        EXIT_ERROR, "Wyoming server: an event's header line, data or payload over its limit (refused unread)"
    ),
    "wyoming_too_long": ErrorCode(
        EXIT_ERROR, "Wyoming server: audio over `[wyoming] max_audio_s` or text over `max_text_chars`"
    ),
}
"""Every error code, in alphabetical order, with its exit status and meaning. Scripts key on the code, not on the
message. A code raised anywhere must be here, and each is in docs/cli.md's table (tests/test_error_codes.py)."""


def exit_status(code: str) -> int:
    """The exit status of a command stopped by an error of this code (:data:`EXIT_ERROR` for one not registered)."""
    entry = ERROR_CODES.get(code)
    return EXIT_ERROR if entry is None else entry.status


def combined_status(codes: list[str]) -> int:
    """The exit status of a check that found errors of these codes: :data:`EXIT_ERROR` when any of them is one
    that trying again will not mend, else the one status they share (:data:`EXIT_UNAVAILABLE`: only sound devices
    missing); :data:`EXIT_OK` for none."""
    statuses = {exit_status(code) for code in codes}
    if not statuses:
        return EXIT_OK
    return statuses.pop() if len(statuses) == 1 else EXIT_ERROR


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

    @property
    def exit_status(self) -> int:
        """The exit status of a command this error stops (:data:`ERROR_CODES`)."""
        return exit_status(self.code)

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
