"""Sound devices as PortAudio (PyAudio) sees them: starting PortAudio quietly, listing its devices, finding one by
index or name, opening a callback stream on it, and bounding the PortAudio calls that can hang on a dead device.
The only module that imports pyaudio; :mod:`edgevoice.audio.streams` runs the streams (their callbacks, lifetime
and health).

PortAudio scans devices once, when the first PyAudio instance starts: a device plugged in later is seen only
after every stream has been closed and a new one is opened. PyAudio's start-up prints ALSA/JACK probing noise from
C to fd 2; it is silenced by redirecting fd 2 while PortAudio starts (other threads' stderr is lost meanwhile).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from edgevoice.errors import AudioDeviceError
from edgevoice.native_output import quiet_stderr

__all__ = [
    "DeviceInfo",
    "SampleFormat",
    "bounded_call",
    "check_devices",
    "device_setting",
    "find_device",
    "list_devices",
    "open_stream",
    "start_portaudio",
]

SampleFormat = Literal["int16", "float32"]
_PA_INT16, _PA_FLOAT32 = 0x8, 0x1  # PaSampleFormat


def start_portaudio() -> Any:
    """A started ``pyaudio.PyAudio`` (caller terminates it)."""
    try:
        import pyaudio
    except ImportError as exc:
        raise AudioDeviceError("PyAudio is not installed (pip install pyaudio==0.2.14)") from exc
    with quiet_stderr():
        return pyaudio.PyAudio()


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    index: int
    name: str
    host_api: str
    max_input_channels: int
    max_output_channels: int
    default_rate: int


def _device_info(pa: Any, raw: dict[str, Any]) -> DeviceInfo:
    return DeviceInfo(
        index=int(raw["index"]),
        name=str(raw["name"]),
        host_api=str(pa.get_host_api_info_by_index(raw["hostApi"])["name"]),
        max_input_channels=int(raw["maxInputChannels"]),
        max_output_channels=int(raw["maxOutputChannels"]),
        default_rate=round(raw["defaultSampleRate"]),
    )


def list_devices() -> list[DeviceInfo]:
    """Every device PortAudio sees now (for ``edgevoice devices``)."""
    pa = start_portaudio()
    try:
        return [_device_info(pa, pa.get_device_info_by_index(i)) for i in range(pa.get_device_count())]
    finally:
        pa.terminate()


def find_device(pa: Any, device: str | int | None, kind: Literal["input", "output"]) -> DeviceInfo:
    """The device by index, by name (exact, else a unique case-insensitive substring) or the default one."""
    devices = [_device_info(pa, pa.get_device_info_by_index(i)) for i in range(pa.get_device_count())]
    usable = [d for d in devices if (d.max_input_channels if kind == "input" else d.max_output_channels) > 0]
    names = ", ".join(f"{d.index}: {d.name!r}" for d in usable) or "none"
    if device is None:
        try:
            raw = pa.get_default_input_device_info() if kind == "input" else pa.get_default_output_device_info()
        except OSError as exc:
            raise AudioDeviceError(f"no default {kind} device ({kind} devices: {names})") from exc
        return _device_info(pa, raw)
    if isinstance(device, int):
        found = [d for d in usable if d.index == device]
    else:
        found = [d for d in usable if d.name.lower() == device.lower()] or [
            d for d in usable if device.lower() in d.name.lower()
        ]
    if len(found) == 1:
        return found[0]
    problem = "matches several" if found else "matches no"
    raise AudioDeviceError(
        f"{kind} device {device!r} {problem} {kind} device ({kind} devices: {names})", code="audio_device_missing"
    )


def device_setting(value: str) -> str | int | None:
    """An ``[audio] input_device``/``output_device`` value as :func:`find_device` takes it: empty is the default
    device, digits an index, anything else a name."""
    if not value:
        return None
    return int(value) if value.isdigit() else value


def check_devices(
    input_device: str, output_device: str, *, portaudio: Callable[[], Any] | None = None
) -> list[AudioDeviceError]:
    """What stops the configured devices (``[audio]`` settings) from being found now, one error per device, each
    naming its key and the devices there are; nothing is opened. ``portaudio`` starts PortAudio (tests pass a
    fake)."""
    try:
        pa = (portaudio or start_portaudio)()
    except AudioDeviceError as exc:
        return [exc]
    errors = []
    try:
        for key, value, kind in (("input_device", input_device, "input"), ("output_device", output_device, "output")):
            try:
                find_device(pa, device_setting(value), kind)  # type: ignore[arg-type]
            except AudioDeviceError as exc:
                errors.append(AudioDeviceError(f"audio.{key} = {value!r}: {exc.message}", code=exc.code))
    finally:
        pa.terminate()
    return errors


def open_stream(
    pa: Any,
    device: DeviceInfo,
    kind: Literal["input", "output"],
    *,
    rate: int,
    channels: int,
    sample_format: SampleFormat,
    frames_per_buffer: int,
    callback: Callable[[bytes | None, int, dict[str, float], int], Any],
) -> Any:
    """A PortAudio callback stream on ``device``, not started yet, once the device has said it takes the format."""
    pa_format = _PA_INT16 if sample_format == "int16" else _PA_FLOAT32
    where = f"{kind} device {device.index} {device.name!r}"
    try:
        if kind == "input":
            pa.is_format_supported(rate, input_device=device.index, input_channels=channels, input_format=pa_format)
        else:
            pa.is_format_supported(rate, output_device=device.index, output_channels=channels, output_format=pa_format)
    except ValueError as exc:
        raise AudioDeviceError(
            f"{where} does not take {channels} channel(s) of {sample_format} at {rate} Hz: {exc}"
        ) from exc
    try:
        with quiet_stderr():
            return pa.open(
                rate=rate,
                channels=channels,
                format=pa_format,
                input=kind == "input",
                output=kind == "output",
                input_device_index=device.index if kind == "input" else None,
                output_device_index=device.index if kind == "output" else None,
                frames_per_buffer=frames_per_buffer,
                start=False,
                stream_callback=callback,
            )
    except OSError as exc:
        raise AudioDeviceError(f"cannot open {where} at {rate} Hz: {exc}") from exc


def bounded_call(call: Callable[[], object], timeout: float, what: str) -> None:
    """Run a PortAudio call that can hang on a dead device; give up after ``timeout`` (the helper thread, stuck in
    C, is then left behind: nothing can interrupt it)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    worker = threading.Thread(target=run, name=f"edgevoice-audio-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AudioDeviceError(f"{what} did not return within {timeout} s (device hung)")
    if failure:
        raise AudioDeviceError(f"{what} failed: {failure[0]}") from failure[0]
