"""`edgevoice config --check`: what a valid config still gets wrong before a start, every problem at once.

Loading the config has already checked each value's type and range (:mod:`edgevoice.config`); these checks look
outside it without loading a model: the knowledge and the small-talk phrases parse, every configured model is
installed and matches its pinned checksum, the recognizer speaks the configured language, the sound devices exist,
the remote model's key and the admin page's token can be read, the activation's key device or GPIO chip is there,
and the directories and files the service would write are its own. ``--print`` shows the effective configuration,
secrets masked.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from edgevoice.config import Config
from edgevoice.errors import ConfigError, EdgeVoiceError, ModelMissingError
from edgevoice.kiosk.knowledge import Entry

log = logging.getLogger(__name__)

__all__ = ["ConfigReport", "check_config", "check_own_paths", "effective_config", "masked"]

SECRET = re.compile(r"(^|_)(api_key|token|password|secret)$|._key$|^webhook_url$")
"""Config keys whose values ``--print`` masks (a key file's path is not a secret: ``api_key_file`` is shown; nor is
``activation.key``, a keyboard key). ``actions.webhook_url`` is masked: its path is the receiver's secret (a Home
Assistant webhook id)."""
MASK = "********"


@dataclasses.dataclass
class ConfigReport:
    """The problems found: errors (the service would not start, or not as configured) and warnings."""

    source: str
    errors: list[EdgeVoiceError] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    """What is worth knowing and needs nothing done (the knowledge's compile)."""

    @property
    def ok(self) -> bool:
        return not self.errors

    def check(self, step: Callable[[], object]) -> None:
        """Run one check; its error is kept and the next check runs."""
        try:
            step()
        except EdgeVoiceError as exc:
            self.errors.append(exc)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "source": self.source,
            "errors": [e.as_json() for e in self.errors],
            "warnings": self.warnings,
            "notes": self.notes,
        }


def check_config(config: Config, *, devices: bool = True, portaudio: Callable[[], Any] | None = None) -> ConfigReport:
    """Every check below on ``config``; ``devices=False`` leaves the sound devices out (a box being prepared away
    from its sound hardware)."""
    from edgevoice.kiosk.knowledge import parse_knowledge
    from edgevoice.kiosk.small_talk import SmallTalk
    from edgevoice.review.service import check_review

    report = ConfigReport(config.source)
    entries: list[Entry] = []

    def knowledge() -> None:
        entries.extend(
            parse_knowledge(config.knowledge_text(), source=config.knowledge_source(), warnings=report.warnings)
        )
        check_answer_lengths(config, entries, report.warnings)

    report.check(knowledge)
    report.check(lambda: SmallTalk.load(config.kiosk.persona, config.kiosk.small_talk_file))
    if entries:
        report.check(lambda: report.notes.append(knowledge_compile_note(config, entries)))
    report.check(lambda: check_admin(config))
    report.check(lambda: check_review(config, report.warnings))
    from edgevoice.act.service import check_actions

    report.check(lambda: check_actions(config, report.warnings))
    from edgevoice.config.wyoming import wyoming_warnings

    report.warnings += wyoming_warnings(config.wyoming)
    check_own_paths(config, report)
    if config.llm.backend == "openai":
        from edgevoice.engines.openai_remote import read_api_key

        report.check(lambda: read_api_key(key_file=config.llm.api_key_file, key_env=config.llm.api_key_env))
        if config.llm.hedge_ms >= 1000 * config.kiosk.reply_budget_s:
            report.warnings.append(
                f"llm.hedge_ms = {config.llm.hedge_ms} is not below kiosk.reply_budget_s = "
                f"{config.kiosk.reply_budget_s}: when the server is slow, the fallback phrase comes before the local "
                "model may answer"
            )
    from edgevoice.live.activation_inputs import check_activation

    report.errors += check_activation(config.activation, report.warnings)
    asr_path = _check_models(config, report)
    report.check(lambda: check_language(config, asr_path))
    if devices:
        from edgevoice.audio.devices import check_devices

        report.errors += check_devices(config.audio.input_device, config.audio.output_device, portaudio=portaudio)
    return report


def knowledge_compile_note(config: Config, entries: Sequence[Entry]) -> str:
    """Whether and by which model the knowledge's ``entries`` are compiled (:mod:`edgevoice.knowledge_compile`)."""
    from edgevoice.knowledge_compile import compile_note
    from edgevoice.models.configured import model_store

    return compile_note(config, model_store(config), entries)


def check_answer_lengths(config: Config, entries: Sequence[Entry], warnings: list[str]) -> None:
    """Warn of each answer longer than one reply may be (:class:`~edgevoice.reply.bounds.ReplyBounds`: ``[llm]
    max_tokens``' characters, ``[kiosk] max_clauses``): read out directly it would be cut, and the operator should
    know before a visitor hears half a price list."""
    from edgevoice.clock import ManualClock
    from edgevoice.reply.bounds import ReplyBounds, ReplyLimit

    bounds = ReplyBounds(max_tokens=config.llm.max_tokens, max_clauses=config.kiosk.max_clauses)
    for number, entry in enumerate(entries, 1):
        limit = ReplyLimit(bounds, ManualClock())
        limit.feed(entry.answer)
        limit.finish()
        if limit.cut is not None:
            name = (entry.question or entry.answer)[:40]
            warnings.append(
                f"{config.knowledge_source()}: entry {number} ({name!r}) has an answer longer than one reply may "
                f"be (its {limit.cut.value}: [llm] max_tokens = {config.llm.max_tokens}, "
                f"[kiosk] max_clauses = {config.kiosk.max_clauses}); read out, it is cut: shorten it or split it"
            )


def check_own_paths(config: Config, report: ConfigReport) -> None:
    """The sockets and files the service creates hold nothing it must not replace (:mod:`edgevoice.ownership`): the
    metrics socket and textfile, the admin page's, the display's and the trigger's Unix sockets, the debug recorder's
    directory. `edgevoice run` makes this check before loading a model."""
    from edgevoice.admin.server import check_socket_path
    from edgevoice.config.admin_listen import effective_admin_listen
    from edgevoice.config.listen_address import effective_listen
    from edgevoice.live.activation_inputs import check_activation_socket
    from edgevoice.live.metrics import check_metrics_files
    from edgevoice.live.recorder import check_record_dir, default_debug_dir

    report.check(
        lambda: check_metrics_files(effective_listen(config.metrics.listen), config.metrics.textfile, report.warnings)
    )
    admin = effective_admin_listen(config.admin.listen)
    if admin.startswith("unix:"):
        report.check(lambda: check_socket_path(admin[5:], report.warnings))
    display = config.display.listen
    if display.startswith("unix:"):
        from edgevoice.ownership import check_socket

        report.check(lambda: check_socket("display.listen", display[5:], report.warnings))
    report.check(lambda: check_activation_socket(config.activation, report.warnings))
    if config.debug.record_turns > 0:
        record_dir = config.debug.record_dir
        report.check(lambda: check_record_dir(Path(record_dir).expanduser() if record_dir else default_debug_dir()))


def refuse_foreign_paths(config: Config) -> None:
    """Raise the first of :func:`check_own_paths`'s refusals: a socket or file the service
    would create where something that is not its own is; the trigger socket served by another process too (the admin
    page and metrics then only go without, with a warning)."""
    from edgevoice.live.activation_inputs import check_activation_socket

    check_activation_socket(config.activation, None)  # served by another process: a second kiosk on one trigger
    report = ConfigReport(config.source)
    check_own_paths(config, report)
    for warning in report.warnings:
        log.warning("%s", warning)
    if report.errors:
        raise report.errors[0]


def check_admin(config: Config) -> None:
    """The admin page's token file holds a token (its Unix socket: :func:`check_own_paths`)."""
    from edgevoice.config.admin_listen import read_token

    if config.admin.token_file:
        read_token(config.admin.token_file)


def _check_models(config: Config, report: ConfigReport) -> Path | None:
    """Each configured model installed and verified (hashed where its stamp no longer matches); the embedding model
    only with ``[kiosk] semantic``, and its absence is a warning (the kiosk then matches by words). Returns the
    recognizer's file when it checked out."""
    from edgevoice.models.configured import embedder_files, model_store, moonshine_files, piper_files, resolve

    store = model_store(config)
    m = config.models
    found: dict[str, Path] = {}

    def model(key: str, value: str) -> None:
        if (spec := store.manifest.find(value)) is not None and spec.name != value:
            report.warnings.append(f"models.{key}: {store.manifest.former_name(value)}")
            value = spec.name
        try:
            if key == "tts":
                found[key], voice_config = piper_files(store, value)
                if not voice_config.is_file():
                    raise ModelMissingError(f"no {voice_config} (the voice's config, beside its model)")
            elif key == "embed":
                found[key] = embedder_files(store, value)["weights"]
            elif key == "asr" and spec is not None and spec.output().format == "ort":
                found[key] = moonshine_files(store, value)[0]  # all three files checked
            else:
                found[key] = resolve(store, key, value)
        except EdgeVoiceError as exc:
            prefix = f"models.{key} = {value!r}: "
            message = exc.message if exc.message.startswith(prefix) else prefix + exc.message
            if key == "embed" and isinstance(exc, ModelMissingError):
                report.warnings.append(f"{message} (semantic matching is off until it is installed)")
                return
            raise EdgeVoiceError(message, code=exc.code) from exc

    keys = ["vad", "turn", "asr", "llm", "tts"] + (["embed"] if config.kiosk.semantic else [])
    for key in keys:
        report.check(functools.partial(model, key, getattr(m, key)))
    return found.get("asr")


def check_language(config: Config, asr_path: Path | None) -> None:
    """``[asr] language`` is one whisper.cpp knows (or ``auto``), and the recognizer is multilingual unless it is
    English: an English-only model (``*.en``) told another language gives nothing useful. Judged from the model file
    when it is there, else from its name."""
    from edgevoice.engines.whispercpp import whisper_languages

    language = config.asr.language
    key = f"asr.language = {language!r}"
    if language != "auto":
        known = whisper_languages()
        if language not in known:
            raise ConfigError(f"{key}: not a language Whisper knows (one of: auto, {', '.join(sorted(known))})")
    if language == "en":
        return
    if asr_path is not None:
        from edgevoice.models.whisper_ggml import inspect_ggml

        multilingual = asr_path.suffix != ".ort" and inspect_ggml(asr_path).hparams.is_multilingual  # Moonshine: en
        named = f"{asr_path.name}"
    else:
        multilingual = not re.search(r"\.en($|[._-])", Path(config.models.asr).name)
        named = config.models.asr
    if not multilingual:
        raise ConfigError(
            f"{key}: models.asr = {config.models.asr!r} ({named}) is an English-only Whisper model; "
            "set language = 'en' or choose a multilingual model (`edgevoice models list`, role asr)"
        )


def effective_config(config: Config) -> dict[str, Any]:
    """The configuration as TOML tables, every default filled in, secrets masked (for ``--print``)."""
    raw = dataclasses.asdict(config)
    raw.pop("source", None)
    return masked(raw)


def masked(tables: dict[str, Any]) -> dict[str, Any]:
    """``tables`` with every non-empty value of a secret key (:data:`SECRET`) replaced by :data:`MASK`."""
    out: dict[str, Any] = {}
    for key, value in tables.items():
        if isinstance(value, dict):
            out[key] = masked(value)
        elif SECRET.search(key) and value:
            out[key] = MASK
        else:
            out[key] = value
    return out
