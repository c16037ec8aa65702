"""Voice-to-voice measured on the speaker side: where the visitor speaks in the microphone recording (which also
holds the kiosk's echo) and where the kiosk speaks in the loudspeaker recording. Pure functions on float audio.

The visitor's utterances are found by what they are, not by how loud they are: each played clip is located in the
microphone recording by cross-correlation (:func:`locate`), so the kiosk's echo around it (whose delay a loaded
PulseAudio loopback moves by tens of milliseconds) can neither split an utterance nor pass for one."""

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


def locate(recording: FloatAudio, clip: FloatAudio, *, start: int, stop: int) -> tuple[int, float] | None:
    """Where ``clip`` begins in ``recording``, searched over beginnings from ``start`` to ``stop`` (samples), and
    the match's strength: the share of the clip's energy the recording holds there (1.0 when it was recorded at
    its own level, about 0 where it is not). None when the recording is too short to hold the clip there."""
    start, stop = max(0, start), min(stop, len(recording) - len(clip))
    energy = float(np.dot(clip, clip))
    if stop < start or energy == 0.0:
        return None
    segment = recording[start : stop + len(clip)].astype(np.float64)
    n = 1 << (len(segment) + len(clip)).bit_length()
    corr = np.fft.irfft(np.fft.rfft(segment, n) * np.conj(np.fft.rfft(clip.astype(np.float64), n)), n)
    k = int(np.argmax(corr[: stop - start + 1]))
    return start + k, float(corr[k]) / energy


def loud_frames(clip: FloatAudio, rate: int, *, level: float = 0.01) -> np.ndarray:
    """The indices of the 10 ms frames of ``clip`` louder than ``level`` (RMS), in order."""
    hop = rate // 100
    n = len(clip) // hop
    return np.flatnonzero(np.sqrt(np.mean(clip[: n * hop].reshape(n, hop) ** 2, axis=1)) > level)


def with_longest_gap(clip: FloatAudio, rate: int, seconds: float) -> FloatAudio | None:
    """``clip`` with its longest quiet gap inside the speech (between two 10 ms frames louder than the level of
    :func:`loud_frames`) made ``seconds`` long: a comma's gap turned into a pause in mid-sentence. None when the
    speech has no gap."""
    hop = rate // 100
    loud = loud_frames(clip, rate)
    if len(loud) < 2:
        return None
    gap = int(np.argmax(np.diff(loud)))
    start, stop = (loud[gap] + 1) * hop, loud[gap + 1] * hop
    return np.concatenate([clip[:start], np.zeros(int(seconds * rate), np.float32), clip[stop:]])


def speech_bounds(clip: FloatAudio, rate: int, *, level: float = 0.01) -> tuple[int, int]:
    """First and last sample of the 10 ms frames of ``clip`` louder than ``level`` (RMS): where its speech is."""
    hop = rate // 100
    loud = loud_frames(clip, rate, level=level)
    if len(loud) == 0:
        raise ValueError("the clip holds no speech")
    return int(loud[0]) * hop, (int(loud[-1]) + 1) * hop


def played_spans(
    mic: FloatAudio, played: list[tuple[FloatAudio, int]], rate: int, *, search_s: float = 10.0, strength: float = 0.5
) -> list[tuple[int, int] | None]:
    """Where each played clip's speech is in the ``mic`` recording: ``played`` holds (clip, the recording's length
    when it was played); each clip is searched from a quarter second before that to ``search_s`` after. None for a
    clip recorded at under ``strength`` of its energy there (lost, cut, or not played)."""
    out: list[tuple[int, int] | None] = []
    for clip, hint in played:
        found = locate(mic, clip, start=hint - rate // 4, stop=hint + int(search_s * rate))
        if found is None or found[1] < strength:
            out.append(None)
            continue
        first, last = speech_bounds(clip, rate)
        out.append((found[0] + first, found[0] + last))
    return out


def reply_latencies(
    utterances: list[tuple[int, int] | None], replies: list[tuple[int, int]], offset: int, rate: int
) -> list[float | None]:
    """For each utterance (mic samples), seconds from its end to the start of the first reply (speaker samples)
    that begins after it and before the next utterance ends; None where no reply came or the utterance was not
    found."""
    out: list[float | None] = []
    for i, span in enumerate(utterances):
        if span is None:
            out.append(None)
            continue
        end = span[1]
        limit = next((later[1] for later in utterances[i + 1 :] if later is not None), None)
        starts = [s + offset for s, _ in replies if s + offset > end and (limit is None or s + offset < limit)]
        out.append((min(starts) - end) / rate if starts else None)
    return out
