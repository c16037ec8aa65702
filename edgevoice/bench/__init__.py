"""Benchmarks run by ``edgevoice bench``: the conversation-quality benchmark (``--quality``)."""
