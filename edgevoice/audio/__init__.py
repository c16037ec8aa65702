"""Sound in and out: device streams, the shared rings between the callbacks and the loop, echo cancellation,
capture and playback, and the private PulseAudio room the tests and the self-test run in."""

SAMPLE_RATE = 16000
"""The rate every model stage takes (Hz): the recognizer, the voice activity detector, the end-of-turn and wake-word
models, and the echo canceller and the rings between them. The voice speaks at its own rate; devices run at theirs."""
