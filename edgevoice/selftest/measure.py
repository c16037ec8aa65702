"""Voice-to-voice measured on the speaker side: where the visitor speaks in the microphone recording (which also
holds the kiosk's echo) and where the kiosk speaks in the loudspeaker recording. Pure functions on float audio."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatAudio = npt.NDArray[np.float32]


def spans(audio: FloatAudio, rate: int, *, threshold: float = 0.02, gap_s: float = 0.6) -> list[tuple[int, int]]:
    """(start, end) sample spans where the signal is audible, pauses shorter than ``gap_s`` bridged."""
    loud = np.flatnonzero(np.abs(audio) > threshold)
    if len(loud) == 0:
        return []
    breaks = np.flatnonzero(np.diff(loud) > gap_s * rate)
    starts = np.concatenate([[loud[0]], loud[breaks + 1]])
    ends = np.concatenate([loud[breaks], [loud[-1]]])
    return [(int(a), int(b) + 1) for a, b in zip(starts, ends, strict=True)]


def visitor_spans(
    mic: FloatAudio,
    spk: FloatAudio,
    offset: int,
    rate: int,
    *,
    echo_delay_ms: float = 40.0,
    echo_gain_db: float = -10.0,
    gap_s: float = 0.6,
) -> list[tuple[int, int]]:
    """Where the visitor speaks in the ``mic`` recording: 10 ms frames whose level clearly exceeds the loudest echo
    the speaker recording predicts nearby (the room's echo path: ``echo_delay_ms``, ``echo_gain_db``). ``offset``:
    speaker sample i was recorded at the same moment as microphone sample i + offset."""
    hop = rate // 100
    shift = offset + int(echo_delay_ms / 1000 * rate)
    echo = np.zeros(len(mic), dtype=np.float32)
    lo, hi = max(shift, 0), min(len(mic), shift + len(spk))
    if hi > lo:
        echo[lo:hi] = spk[lo - shift : hi - shift] * 10 ** (echo_gain_db / 20)
    n = len(mic) // hop
    mic_rms = np.sqrt(np.mean(mic[: n * hop].reshape(n, hop) ** 2, axis=1))
    echo_rms = np.sqrt(np.mean(echo[: n * hop].reshape(n, hop) ** 2, axis=1))
    echo_env = np.max(np.stack([np.roll(echo_rms, k) for k in range(-4, 5)]), axis=0)  # +-40 ms of slack
    active = (mic_rms > 2.0 * echo_env + 0.01).astype(np.float32)
    return [(a * hop, b * hop) for a, b in spans(active, 100, threshold=0.5, gap_s=gap_s)]


def reply_latencies(
    utterances: list[tuple[int, int]], replies: list[tuple[int, int]], offset: int, rate: int
) -> list[float | None]:
    """For each utterance (mic samples), seconds from its end to the start of the first reply (speaker samples)
    that begins after it and before the next utterance ends; None where no reply came."""
    out: list[float | None] = []
    for i, (_, end) in enumerate(utterances):
        limit = utterances[i + 1][1] if i + 1 < len(utterances) else None
        starts = [s + offset for s, _ in replies if s + offset > end and (limit is None or s + offset < limit)]
        out.append((min(starts) - end) / rate if starts else None)
    return out
