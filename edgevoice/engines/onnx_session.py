"""ONNX Runtime sessions owned by edgevoice: thread counts set per session, clear errors for bad files."""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime as ort

from edgevoice.errors import ModelFormatError, ModelMissingError

log = logging.getLogger(__name__)
PROVIDERS = {"cpu": ("CPUExecutionProvider",), "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider")}
"""Config names of execution providers -> ONNX Runtime's, in order of preference."""


def available_providers() -> list[str]:
    """The config names whose first ONNX Runtime provider this installation has."""
    have = set(ort.get_available_providers())
    return [name for name, chain in PROVIDERS.items() if chain[0] in have]


def open_session(
    path: Path,
    *,
    threads: int = 1,
    providers: tuple[str, ...] = ("CPUExecutionProvider",),
    varying_shapes: bool = False,
) -> ort.InferenceSession:
    """Open ``path`` as an ONNX Runtime session, or raise an :class:`~edgevoice.errors.ModelError` naming the file.

    ONNX Runtime itself reports a truncated or non-ONNX file as an exception (never a crash); it is wrapped here so
    the message names the file and what is wrong with it.

    ``varying_shapes``: the inputs change length from call to call (a voice's sentences). ONNX Runtime keeps a memory
    plan for every input shape it has seen, so such a session grows for as long as new lengths come; it plans each
    call afresh instead. Measured on the Piper voice (40 sentences of 3-20 words, after a first pass over them): RSS
    +13 to +88 MB with the plans kept, +2 MB without; its first audio in 226 ms against 205-224 ms.

    With ``threads`` above one, the pool's threads wait for work asleep: ONNX Runtime's default has them spin for a
    while after every run, which the VAD, run every 32 ms, would keep doing all the time the kiosk listens.
    """
    if not path.is_file():
        raise ModelMissingError(f"model file {path} does not exist")
    ort.disable_telemetry_events()  # no model names, device id or program path leave the process
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.enable_mem_pattern = not varying_shapes
    for pool in ("intra_op", "inter_op"):  # a pool's threads sleep between runs instead of spinning (idle CPU)
        options.add_session_config_entry(f"session.{pool}.allow_spinning", "0")
    available = set(ort.get_available_providers())
    chosen = [p for p in providers if p in available] or ["CPUExecutionProvider"]
    if chosen[0] != providers[0]:
        log.warning("%s is not available in this onnxruntime; %s runs on %s", providers[0], path.name, chosen[0])
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=chosen)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf/... types
        raise ModelFormatError(f"{path} is not a valid ONNX model ({type(exc).__name__}: {exc})") from exc
