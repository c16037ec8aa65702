"""The background knowledge compile's wiring: other ways of asking each entry, written by the strongest model between
turns (:func:`compile_in_background`; the compile: :mod:`edgevoice.knowledge_compile`, docs/knowledge.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from edgevoice.config import Config
from edgevoice.models.store import ModelStore

if TYPE_CHECKING:
    from edgevoice.converse import Assistant

__all__ = ["compile_in_background"]


def compile_in_background(config: Config, store: ModelStore, assistant: Assistant, idle: Callable[[], bool]) -> None:
    """``assistant``'s knowledge compiled while ``idle()``, now and after every reload; until a compile hands over its
    questions, the kiosk answers from the knowledge as written."""
    from edgevoice.knowledge_compile import KnowledgeCompile

    # other ways of asking each entry, written by the strongest model between turns; until then, as written
    assistant.compile_knowledge(KnowledgeCompile(config, store, assistant.use_compiled, idle=idle))
