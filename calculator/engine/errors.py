"""Errors the engine raises for bad input. Each names the field it is about, so the CLI, the form and
the JSON API can show the message beside the field (and answer 400 / exit code 2, never a traceback)."""
from __future__ import annotations


class EngineInputError(ValueError):
    """Input the engine cannot use. ``field`` is the vLLM-style flag name in snake_case
    (``gpu``, ``max_model_len``, ``config.num_key_value_heads``...), ``message`` a sentence."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
