"""Built-in tiny models: the committed config equals what the writer writes (so the calculator answers them
without torch), and the writer is safe to call from two processes at once."""
from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import pytest

from calculator.metadata import builtin

HAVE_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None


@pytest.mark.skipif(not HAVE_TORCH, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
def test_the_committed_config_is_what_the_writer_writes(tmp_path):
    for model_id, (dirname, writer) in builtin.BUILTIN_MODELS.items():
        assert writer(tmp_path / dirname) == builtin.builtin_config(model_id)


@pytest.mark.skipif(not HAVE_TORCH, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
def test_two_first_uses_at_once_both_get_the_model(tmp_path):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: builtin.ensure_builtin("tiny-random/llama", root=tmp_path), range(2)))
    assert results[0][1] == results[1][1] == builtin.builtin_config("tiny-random/llama")
    assert (tmp_path / "tiny-random-llama" / "model.safetensors").exists()
    assert not list(tmp_path.glob("*.partial-*"))
