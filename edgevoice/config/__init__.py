"""Configuration: declared once, read from one TOML file, validated at load.

Every value has a default, so edgevoice runs with no file at all. A bad value fails at start with the key, the value
and what is allowed (:class:`~edgevoice.errors.ConfigError`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from edgevoice import data
from edgevoice.config.actions import ActionsConfig as ActionsConfig
from edgevoice.config.fields import rng as _rng
from edgevoice.config.served import AdminConfig as AdminConfig
from edgevoice.config.served import DisplayConfig as DisplayConfig
from edgevoice.config.served import MetricsConfig as MetricsConfig
from edgevoice.config.served import ReviewConfig as ReviewConfig
from edgevoice.config.wyoming import WyomingConfig as WyomingConfig
from edgevoice.errors import ConfigError
from edgevoice.listen.endpointing import EndpointingConfig as EndpointingConfig  # declared with its state machine

log = logging.getLogger(__name__)

MAX_KNOWLEDGE_BYTES = 2_000_000
"""The largest knowledge text (UTF-8 bytes): about 20,000 short facts, more than
:data:`edgevoice.kiosk.knowledge.MAX_ENTRIES` allows."""

# Per-field constraints: metadata={"range": (lo, hi)} for numbers, Literal[...] types for choices.


@dataclass(frozen=True)
class ModelsConfig:
    dir: str = ""
    """Where installed models live; empty: $EDGEVOICE_MODELS_DIR or ~/.local/share/edgevoice/models."""
    vad: str = "silero-vad"
    turn: str = "smart-turn-v3.2"
    asr: str = "whisper-tiny.en"
    llm: str = "qwen2.5-coder-0.5b-instruct-q4km"
    tts: str = "piper-en_US-joe-medium"
    embed: str = "all-minilm-l6-v2"
    """Each is a manifest name (see `edgevoice models list`) or a path to one's own model file (``embed``: a
    sentence-transformers folder with model.safetensors, tokenizer.json and config.json)."""


@dataclass(frozen=True)
class VadConfig:
    threshold: float = field(default=0.5, metadata=_rng(0.05, 0.95))
    min_speech_ms: int = field(default=200, metadata=_rng(30, 5000))
    min_silence_ms: int = field(default=400, metadata=_rng(30, 5000))
    """Silence that separates two utterances in a recording."""
    pad_ms: int = field(default=150, metadata=_rng(0, 1000))
    """Audio kept before and after each speech segment."""
    threads: int = field(default=1, metadata=_rng(1, 64))


@dataclass(frozen=True)
class AsrConfig:
    threads: int = field(default=2, metadata=_rng(1, 64))
    audio_ctx: int = field(default=0, metadata=_rng(0, 1500))
    """Encoder context in 20 ms frames; 0 sizes it to the audio (much faster on short turns)."""
    language: str = "en"
    initial_prompt: str = ""
    max_seconds: float = field(default=30.0, metadata=_rng(1.0, 30.0))
    """Speech longer than this is cut to its first max_seconds (one Whisper window)."""
    unsure_below: float = field(default=0.6, metadata=_rng(0.0, 1.0))
    """A question heard with less confidence than this (the geometric mean of its tokens' probabilities) that would
    be refused as heard is asked for again, once, instead (0: always refused)."""


def _check_base_url(key: str, value: str) -> None:
    if not value:
        return
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{key} = {value!r}: must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ConfigError(f"{key}: must not hold credentials (use llm.api_key_file or llm.api_key_env)")


def _check_env_name(key: str, value: str) -> None:
    if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ConfigError(f"{key}: must name an environment variable (letters, digits, _), not hold the key itself")


@dataclass(frozen=True)
class LlmConfig:
    threads: int = field(default=2, metadata=_rng(1, 64))
    n_ctx: int = field(default=2048, metadata=_rng(256, 32768))
    n_batch: int = field(default=256, metadata=_rng(8, 4096))
    n_gpu_layers: int = field(default=0, metadata=_rng(-1, 1000))
    max_tokens: int = field(default=80, metadata=_rng(8, 1024))
    temperature: float = field(default=0.0, metadata=_rng(0.0, 2.0))
    top_p: float = field(default=0.9, metadata=_rng(0.05, 1.0))
    repeat_penalty: float = field(default=1.1, metadata=_rng(1.0, 2.0))
    seed: int = field(default=1234, metadata=_rng(0, 2**31 - 1))
    backend: Literal["local", "openai"] = "local"
    """"local": the model above answers alone. "openai": an OpenAI-compatible server (llama.cpp's server, vLLM,
    Ollama) at ``base_url`` answers, hedged with the local model, which answers whenever the server is down, slow or
    sends garbage (docs/remote-model.md)."""
    base_url: str = field(default="", metadata={"check": _check_base_url})
    """The server's API root, e.g. "http://gpu-server:8080/v1" (``/chat/completions`` is appended)."""
    model: str = ""
    """The model name sent to the server (vLLM and Ollama need it; llama.cpp's server ignores it)."""
    api_key_file: str = ""
    """A file holding the server's API key, read at start (the key itself never goes in this file); may name
    variables, e.g. "${CREDENTIALS_DIRECTORY}/llm-key" for systemd's LoadCredential=."""
    api_key_env: str = field(default="", metadata={"check": _check_env_name})
    """Or the name of an environment variable holding it. Neither: no key is sent."""
    hedge_ms: int = field(default=800, metadata=_rng(0, 30000))
    """How long the server's first clause may take before the local model starts too; whichever model's first
    clause comes first is spoken and the other is cancelled. 0: both start at once."""
    remote_stall_s: float = field(default=2.0, metadata=_rng(0.1, 60.0))
    """A server that sends nothing for this long (or takes this long to accept the connection) is given up."""

    def __post_init__(self) -> None:
        if self.backend == "openai" and not self.base_url:
            raise ConfigError('llm.base_url: must be set with llm.backend = "openai"')
        if self.api_key_file and self.api_key_env:
            raise ConfigError("llm.api_key_file and llm.api_key_env: set one of them, not both")


@dataclass(frozen=True)
class TtsConfig:
    threads: int = field(default=1, metadata=_rng(1, 64))
    length_scale: float = field(default=1.0, metadata=_rng(0.5, 2.0))
    """Speaking rate: below 1 is faster."""
    sentence_silence_ms: int = field(default=150, metadata=_rng(0, 2000))
    provider: Literal["cpu", "cuda"] = "cpu"
    """ONNX Runtime execution provider for the voice; "cuda" needs onnxruntime-gpu and falls back to the CPU (with
    a warning) where CUDA is not available."""
    presynthesize: bool = True
    """Synthesize the knowledge's answers and the refusal in the background after start-up, so that a direct answer
    plays the moment its turn is committed (edgevoice/reply/presynthesis.py)."""
    presynthesized_max_s: float = field(default=300.0, metadata=_rng(0.0, 3600.0))
    """At most this many seconds of that audio in memory (22 kHz voices: about 88 kB a second); answers beyond it
    are synthesized when asked, as without ``presynthesize``."""
    presynthesized_dir: str = ""
    """Where that audio is also kept on disk, so that a restart does not make it again; empty: replies/ in
    $CACHE_DIRECTORY (the service's), else in ~/.cache/edgevoice; "none": memory only."""


@dataclass(frozen=True)
class AudioConfig:
    input_device: str = ""
    """Input device: a name substring or an index from `edgevoice devices`; empty: the system default."""
    output_device: str = ""
    input_rate: int = field(default=0, metadata=_rng(0, 192000))
    """Device rate in Hz; 0: the device's default rate. Audio is resampled to the models' rates."""
    output_rate: int = field(default=0, metadata=_rng(0, 192000))
    frame_ms: int = field(default=10, metadata=_rng(5, 100))
    """Callback period of both streams."""
    echo_cancellation: bool = True
    """WebRTC echo cancellation with the playback as reference (a kiosk has a loudspeaker, not a headset)."""
    noise_suppression: bool = True
    barge_in_level_db: float = field(default=-40.0, metadata=_rng(-80.0, 0.0))
    """With echo cancellation: the echo-cancelled microphone level (dBFS) that, reached in a 10 ms frame while the
    kiosk speaks, pauses the speaker as the visitor talking over it (the VAD's speech above it then confirms)."""
    compute_nice: int = field(default=0, metadata=_rng(0, 19))
    """How much lower the CPU priority of the compute threads (recognition, language model, synthesis) is than the
    audio path's (0: the same). Off by default: the compute threads also run Python, and one of them holding the GIL
    while the kernel keeps it waiting behind other work holds up the audio callbacks too (see
    :mod:`edgevoice.priority`)."""


@dataclass(frozen=True)
class KioskConfig:
    name: str = "Ada"
    fallback_phrase: str = "Sorry, could you say that again?"
    """Spoken when a turn fails (an engine raised or hung) or no reply audio came within ``reply_budget_s``; it is
    synthesized once at start-up, so it plays whatever state the engines are in."""
    reply_budget_s: float = field(default=4.0, metadata=_rng(0.5, 60.0))
    """Longest wait from the end of a turn to its first reply audio before the reply is abandoned for the
    fallback phrase."""
    persona: str = field(default_factory=data.sample_persona)
    """Who the assistant is and where; the default is the sample venue's (``edgevoice/data/sample_venue``)."""
    knowledge: str = field(default_factory=data.sample_knowledge)
    """The venue facts inline (question-and-answer lines, Markdown or TOML [[qa]]); the default is the sample
    venue's."""
    knowledge_file: str = ""
    """A file of venue facts (question-and-answer lines, Markdown or TOML [[qa]]); when set it replaces
    ``knowledge``."""
    max_sentences: int = field(default=2, metadata=_rng(1, 5))
    max_clauses: int = field(default=8, metadata=_rng(1, 40))
    """The most clauses of one reply, whatever ends them (a comma, a dash, a full stop, or 20 words without a mark):
    a model that never ends a sentence is stopped here (``max_sentences`` counts only sentences). With ``[llm]
    max_tokens`` (at most 8 characters a token) and ``max_reply_s``, the bounds every reply is held to
    (docs/live-loop.md)."""
    max_reply_s: float = field(default=20.0, metadata=_rng(1.0, 300.0))
    """The longest a reply is read from the language model (local or remote); it ends there, with what was said."""
    conversation_timeout_s: float = field(default=60.0, metadata=_rng(0.0, 86400.0))
    """After this many seconds without a turn the conversation is forgotten and the next question starts a new
    one: a new visitor's "And on Sundays?" is not read against the last visitor's question, and the model never
    sees another visitor's words. 0: never (the history is only trimmed to its token budget)."""
    grounding_threshold: float = field(default=0.2, metadata=_rng(0.0, 1.0))
    """A question whose words the best knowledge entry covers less than this (idf-weighted share) is answered "I
    don't know" without asking the language model; 0 turns the gate off. Low on purpose: it stops questions that
    share (almost) nothing with the knowledge; near misses (about an entry's subject, asking what it does not say)
    are the model's to decline."""
    gate: Literal["strict", "lenient"] = "strict"
    """How much of deciding whether the knowledge answers a question is left to the language model. "strict", for
    the default 0.5B model (which declines many paraphrases even with their entry before it, and answers a near miss
    with what its entry does say): a question passes at a cosine of 0.44 to an entry, and one whose best entry's
    answer is further from it than that entry's own question gets "I don't know" (a near miss). "lenient", for a
    model that uses the entry it is given and declines what it does not say (the 1.5B in the manifest): it passes at
    0.40 and the model judges near misses. Measured on the venues' halves in docs/decisions/."""
    knowledge_budget_tokens: int = field(default=1000, metadata=_rng(50, 16384))
    """Knowledge longer than this (estimated tokens) is not put into the prompt whole: each question gets the
    ``retrieve_entries`` entries that match it best."""
    retrieve_entries: int = field(default=4, metadata=_rng(1, 20))
    hint_entries: int = field(default=1, metadata=_rng(0, 20))
    """With the whole knowledge in the prompt, also put this many best-matching entries right before each question
    (a small model then copies the fact instead of searching for it); 0: none. The entry's tokens are prefilled with
    the partial transcripts while the visitor speaks, so the first token waits for them only when the best entry
    changes at the end."""
    venue_examples: int = field(default=0, metadata=_rng(0, 10))
    """Example turns taken from the knowledge itself (a question answered with its own answer) in the cached
    prompt, before the "I don't know" example."""
    reply_check: Literal["clause", "sentence"] = "clause"
    """What of the model's reply is held back, checked against the entries retrieved for the question (with all said
    before it) and then spoken: each clause, so the first words go out at the first comma, or each whole sentence.
    Both stop the reply at the same word: where it brings a value or words the knowledge does not give (an invented
    fact), "I don't know" if nothing was said before. Every reply is checked, however well the knowledge covers its
    question."""
    direct_answers: bool = True
    """A question one knowledge entry answers outright (every word of the question in it, no rival entry) gets that
    entry's answer as written, without the language model: the operator's words, at once."""
    semantic: bool = True
    """Match questions to the knowledge by meaning too (the ``[models] embed`` sentence encoder, one forward pass of
    a few ms per question): paraphrases that share no word with their entry are recognised, questions unrelated to
    every entry get "I don't know". Off, or with the model not installed: by their words only."""
    mend_misheard: bool = True
    """With ``semantic``: a question no entry answers outright is tried with one or two words replaced by venue
    words that sound nearly the same ("Wilcher" as "wheelchair"), and taken so when an entry then answers it
    outright and it comes clearly closer in meaning (edgevoice/kiosk/sounds.py)."""
    compile: bool = False
    """Write other ways of asking each entry in the background with the strongest model installed (the 1.5B, or the
    LAN model of ``[llm] backend = "openai"``; docs/knowledge.md). Off by default: on two cores the 1.5B starves the
    listener while a visitor speaks (turns went unanswered in the live tests); ``edgevoice knowledge compile`` makes
    the compile ahead of time instead. A compile already finished is always used."""
    small_talk_file: str = ""
    """A TOML file of small-talk kinds, trigger patterns and replies (the form of the packaged
    edgevoice/data/en/small_talk.toml, which is used when empty): greetings, thanks, "who are you?" and the like are
    answered with these, at once, without the language model."""
    vocabulary_prompt: bool = False
    """With ``[asr] initial_prompt`` empty, prompt the recognizer with the venue's names from the knowledge. Off by
    default: it gets venue names right far more often, but a prompted decode needs a longer window and costs more
    than twice as much on the path from the end of speech to the reply. Turn it on where visitors say the names."""


def _check_key(key: str, value: str) -> None:
    if value:
        from edgevoice.config.keys import key_code

        key_code(value)


@dataclass(frozen=True)
class ActivationConfig:
    """When the kiosk listens (docs/activation.md)."""

    mode: Literal["always", "push_to_talk", "trigger", "wake_word"] = "always"
    """"always": listen always, a turn ends on silence. "push_to_talk": listen only while the key or GPIO line is
    held; the turn ends on release, and a press while the kiosk speaks interrupts it. "trigger": a press (or a
    trigger over the socket, or from the admin page) opens one turn, which ends on silence. "wake_word": as
    "trigger", and saying ``wake_word`` is a trigger too."""
    wake_word: str = "hey_jarvis"
    """With mode = "wake_word": a model that comes with pymicro-wakeword ("hey_jarvis", "okay_nabu", "hey_mycroft",
    "alexa") or the path of a microWakeWord model's .json file."""
    device: str = ""
    """A Linux input-event device whose ``key`` presses and releases drive the mode, e.g.
    "/dev/input/by-id/usb-...-event-kbd" (the service's user needs read access: the ``input`` group)."""
    key: str = field(default="KEY_SPACE", metadata={"check": _check_key})
    """The key on ``device``: a name from linux/input-event-codes.h (KEY_SPACE, KEY_ENTER, BTN_0...) or its code."""
    gpio_chip: str = ""
    """A GPIO chip, e.g. "/dev/gpiochip0", whose ``gpio_line`` drives the mode (needs the ``gpiod`` package)."""
    gpio_line: int = field(default=0, metadata=_rng(0, 1023))
    gpio_active_low: bool = True
    """The button pulls the line to ground (and the line's pull-up is turned on)."""
    socket: str = ""
    """The Unix datagram socket that takes "press", "release" and "trigger" (`edgevoice trigger`); empty:
    $RUNTIME_DIRECTORY/activation.sock under the service, else $XDG_RUNTIME_DIR/edgevoice-activation.sock; "off":
    none."""
    trigger_timeout_s: float = field(default=8.0, metadata=_rng(1.0, 120.0))
    """In trigger mode: how long a trigger waits for the visitor to speak before listening stops again."""

    def __post_init__(self) -> None:
        if self.socket and self.socket != "off" and not self.socket.startswith("/"):
            raise ConfigError(f"activation.socket = {self.socket!r}: must be an absolute path or 'off'")


@dataclass(frozen=True)
class SelftestConfig:
    budget_ms: float = field(default=500.0, metadata=_rng(50.0, 10000.0))
    """`edgevoice selftest` fails when the p95 voice-to-voice latency exceeds this."""


@dataclass(frozen=True)
class DebugConfig:
    record_turns: int = field(default=0, metadata=_rng(0, 1000))
    """Keep the audio and record of the last this many turns on disk (edgevoice/live/recorder.py); 0, the default:
    no audio is ever written to disk."""
    record_dir: str = ""
    """Where; empty: $STATE_DIRECTORY (the service: /var/lib/edgevoice/debug), else ~/.local/state/edgevoice/turns."""
    log_transcripts: bool = False
    """Put what the visitor said and the reply in the service's journal entries (off: only timings and counts)."""


@dataclass(frozen=True)
class Config:
    models: ModelsConfig = field(default_factory=ModelsConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    tts: TtsConfig = field(default_factory=TtsConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    endpointing: EndpointingConfig = field(default_factory=EndpointingConfig)
    kiosk: KioskConfig = field(default_factory=KioskConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    display: DisplayConfig = field(default_factory=DisplayConfig)
    review: ReviewConfig = field(default_factory=ReviewConfig)
    activation: ActivationConfig = field(default_factory=ActivationConfig)
    selftest: SelftestConfig = field(default_factory=SelftestConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    actions: ActionsConfig = field(default_factory=ActionsConfig)
    wyoming: WyomingConfig = field(default_factory=WyomingConfig)
    source: str = field(default="<defaults>", compare=False)

    def knowledge_source(self) -> str:
        """Where the knowledge comes from, as error messages name it."""
        if self.kiosk.knowledge_file:
            return f"kiosk.knowledge_file = {str(Path(self.kiosk.knowledge_file).expanduser())!r}"
        return "kiosk.knowledge"

    def knowledge_text(self) -> str:
        """The venue facts: the knowledge file when configured, else the inline text."""
        if not self.kiosk.knowledge_file:
            return self.kiosk.knowledge
        from edgevoice.config.knowledge_path import decode_knowledge, open_knowledge_file

        path = Path(self.kiosk.knowledge_file).expanduser()
        try:
            with open_knowledge_file(path) as f:  # a regular file outside the system's directories
                data = f.read(MAX_KNOWLEDGE_BYTES + 1)  # a larger file is refused without reading it whole
        except OSError as exc:
            raise ConfigError(f"kiosk.knowledge_file = {str(path)!r}: cannot read it ({exc.strerror})") from exc
        if len(data) > MAX_KNOWLEDGE_BYTES:
            size = path.stat().st_size
            raise ConfigError(
                f"kiosk.knowledge_file = {str(path)!r}: {size:,} bytes; at most {MAX_KNOWLEDGE_BYTES:,} are allowed "
                "(keep the facts visitors ask about, or split the venue)"
            )
        return decode_knowledge(data, f"kiosk.knowledge_file = {str(path)!r}")
