"""Acoustic echo cancellation and noise suppression: WebRTC's audio processing module (AEC3) on 10 ms frames.

The kiosk hears its own voice. The playback (far-end, "render") signal is known exactly: it is what the loop takes
from its playback ring. Feed each 10 ms render frame with :meth:`EchoCanceller.process_render` and each 10 ms
microphone frame with :meth:`EchoCanceller.process_capture`, in time order, from one thread; the canceller removes
the echo of the render signal from the capture signal and (optionally) suppresses stationary noise.

``stream_delay_ms`` tells the APM how long after a render frame was passed in its echo reaches ``process_capture``
(WebRTC: ``delay = (t_render - t_analyze) + (t_process - t_capture)``). AEC3 estimates the echo delay itself; the
hint only has to be in the right range (its estimator searches up to about 500 ms).

The processed capture signal is late by :attr:`EchoCanceller.capture_delay` samples (AEC3's 64-sample block framing
and its suppressor's overlap, 8 ms at 16 kHz; noise suppression adds 6 ms): date its samples accordingly.

Engine: the ``livekit`` package (Apache-2.0) bundles WebRTC in ``liblivekit_ffi.so`` and exposes it as
``livekit.rtc.AudioProcessingModule``. It needs no network for this: the APM runs in-process. Its native runtime does
not survive ``fork()``: create the canceller in the process that uses it. It is imported only when a canceller is
created.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import EdgeVoiceError

FloatAudio = npt.NDArray[np.float32]

FRAME_MS = 10
CAPTURE_DELAY: dict[tuple[int, bool], int] = {
    # (sample rate, noise suppression) -> samples the processed capture lags its input (measured, livekit 1.2.1)
    (8000, False): 88,
    (8000, True): 136,
    (16000, False): 128,
    (16000, True): 224,
    (32000, False): 260,
    (32000, True): 452,
    (48000, False): 430,
    (48000, True): 718,
}


class EchoCanceller:
    """WebRTC AEC3 (+ noise suppression) for mono audio at ``sample_rate`` (8, 16, 32 or 48 kHz), 10 ms frames."""

    def __init__(
        self,
        sample_rate: int = SAMPLE_RATE,
        *,
        noise_suppression: bool = True,
        high_pass_filter: bool = False,
        stream_delay_ms: int = 0,
    ) -> None:
        if (sample_rate, noise_suppression) not in CAPTURE_DELAY:
            raise EdgeVoiceError(
                f"echo cancellation runs at 8000, 16000, 32000 or 48000 Hz, not {sample_rate}", code="aec_rate"
            )
        try:
            from livekit import rtc
        except ImportError as exc:
            raise EdgeVoiceError(
                "echo cancellation needs the livekit package (pip install livekit==1.2.1)", code="aec_unavailable"
            ) from exc
        self._rtc: Any = rtc
        self.sample_rate = sample_rate
        self.frame_size = sample_rate * FRAME_MS // 1000
        self.noise_suppression = noise_suppression
        self.high_pass_filter = high_pass_filter
        self.stream_delay_ms = stream_delay_ms
        self.capture_delay = CAPTURE_DELAY[(sample_rate, noise_suppression)]
        """Samples by which :meth:`process_capture`'s output lags its input."""
        self._apm: Any = self._call(
            lambda: rtc.AudioProcessingModule(
                echo_cancellation=True,
                noise_suppression=noise_suppression,
                high_pass_filter=high_pass_filter,
                auto_gain_control=False,
            )
        )

    def renewed(self) -> EchoCanceller:
        """A new canceller with the same settings and nothing learnt: for a new echo path (a stream reopened)."""
        return EchoCanceller(
            self.sample_rate,
            noise_suppression=self.noise_suppression,
            high_pass_filter=self.high_pass_filter,
            stream_delay_ms=self.stream_delay_ms,
        )

    def _call(self, action: Any) -> Any:
        try:
            return action()
        except (RuntimeError, ValueError, ImportError) as exc:
            raise EdgeVoiceError(f"WebRTC audio processing failed: {exc}", code="aec_failed") from exc

    def _frame(self, frame: npt.NDArray[np.floating[Any]]) -> Any:
        if self._apm is None:
            raise EdgeVoiceError("echo canceller is closed", code="aec_closed")
        samples = np.asarray(frame, dtype=np.float32).reshape(-1)
        if len(samples) != self.frame_size:
            raise ValueError(f"frames are {self.frame_size} samples ({FRAME_MS} ms), got {len(samples)}")
        pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
        return self._rtc.AudioFrame(bytearray(pcm.tobytes()), self.sample_rate, 1, self.frame_size)

    def process_render(self, frame: npt.NDArray[np.floating[Any]]) -> None:
        """The next 10 ms of what is being played (the far end), as it goes to the playback device."""
        audio = self._frame(frame)
        self._call(lambda: self._apm.process_reverse_stream(audio))

    def process_capture(self, frame: npt.NDArray[np.floating[Any]]) -> FloatAudio:
        """The next 10 ms from the microphone; returns it without the echo (``capture_delay`` samples late)."""
        audio = self._frame(frame)

        def run() -> None:
            self._apm.set_stream_delay_ms(self.stream_delay_ms)
            self._apm.process_stream(audio)

        self._call(run)
        return np.frombuffer(audio.data, dtype=np.int16).astype(np.float32) / 32768.0

    def close(self) -> None:
        """Release the native APM. Safe to call twice."""
        apm, self._apm = self._apm, None
        handle = getattr(apm, "_ffi_handle", None)
        if handle is not None:
            handle.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
