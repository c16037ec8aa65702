"""The answer stage: the venue's knowledge, the gate that grounds each question in it, and the prompt and checks that
keep a small language model to it. :class:`~edgevoice.kiosk.grounding.Kiosk` puts it together; its word lists and the
sample venue are data (``edgevoice/data``)."""
