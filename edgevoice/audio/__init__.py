"""Sound in and out: device streams, the shared rings between the callbacks and the loop, echo cancellation,
capture and playback, and the private PulseAudio room the tests and the self-test run in."""
