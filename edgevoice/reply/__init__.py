"""Replying: the responder (language model to clauses), speakable text, synthesis, the reply's output and the
reply begun speculatively at a pause."""
