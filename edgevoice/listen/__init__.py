"""Listening: voice activity, the end-of-turn state machine, streaming recognition and the committed turn."""
