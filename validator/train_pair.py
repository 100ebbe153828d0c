"""Train the validator's draft/target pair: a small Llama target and a much smaller Llama draft.

Why: a validation run on the CPU needs a model whose acceptance means something. Random weights accept
whatever the draft proposes by accident; a trained pair accepts where the draft has learned what the
target predicts (code indentation and keywords) and rejects where it has not (prose), so acceptance
differs by workload the way it does for real models.

Data (offline on any machine with CPython 3.11): the "code" half is the source of the standard-library
modules in ``CODE_MODULES``; the "prose" half is the Python documentation shipped as
``pydoc_data.topics`` (the language reference text ``help()`` prints), topics in sorted order without the
held-out ones in ``HELD_OUT_TOPICS``. The held-out modules/topics are what ``validator.workloads`` draws
its prompts from, so no prompt was seen in training.

Tokenizer: the byte-level BPE tokenizer ``calculator.crosscheck.tiny_models.write_tokenizer`` writes
(vocabulary padded to 512 in the model).

The target learns both halves; the draft learns the code half only — a code-specialised draft, as drafts
trained on another distribution than the traffic are in practice — so its proposals are accepted more on
code than on prose.

Determinism: ``SEED`` (0) seeds torch and the batch order, ``torch.use_deterministic_algorithms(True)``,
``torch.set_num_threads(2)``; the corpus digest and the Python version are written to
``validator/pair/MANIFEST.json``. Same Python patch release + same torch -> same checkpoints.

Usage: ``python -m validator.train_pair [--out validator/pair] [--steps-target 400] [--steps-draft 400]``
(about 6 minutes on 2 cores). Checkpoints: ``<out>/target`` and ``<out>/draft``, HF format, safetensors,
bfloat16 on disk (served as float32 on the CPU build).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import sysconfig
import time
from pathlib import Path

SEED = 0
SEQ_LEN = 128
BATCH = 16
VOCAB = 512
OUT = Path(__file__).resolve().parent / "pair"

CODE_MODULES = (
    "argparse", "collections/__init__", "dataclasses", "functools", "json/decoder", "json/encoder",
    "pathlib", "string", "textwrap", "typing", "enum", "heapq", "bisect", "shlex", "csv", "fractions",
    "statistics", "random", "difflib", "pprint", "configparser", "copy", "fnmatch", "glob", "tempfile",
)
# Prompts come from here (validator.workloads), never trained on.
HELD_OUT_MODULES = ("calendar", "gettext", "locale", "optparse", "smtplib", "tarfile", "zipfile",
                    "wave", "sched", "queue")
HELD_OUT_TOPICS = ("assert", "assignment", "async", "atom-identifiers", "atom-literals", "attribute-access",
                   "attribute-references", "augassign", "await", "binary", "bitwise", "bltin-code-objects",
                   "bltin-ellipsis-object", "bltin-null-object", "bltin-type-objects", "booleans", "break",
                   "callable-types", "calls", "class")

# Target: 4 layers, hidden 192, GQA 4 heads over 2 KV heads (head_dim 48); draft: 1 layer, hidden 64.
TARGET = dict(hidden_size=192, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=48)
DRAFT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32)
COMMON = dict(vocab_size=VOCAB, max_position_embeddings=1024, tie_word_embeddings=True, bos_token_id=1,
              eos_token_id=2, pad_token_id=0, rope_theta=10000.0)


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def code_text(modules=CODE_MODULES) -> str:
    """The source of ``modules`` (paths under the standard library, without ``.py``), in that order."""
    return "\n\n".join((stdlib_dir() / f"{m}.py").read_text(encoding="utf-8") for m in modules)


def prose_topics(held_out: bool = False) -> list[str]:
    """``pydoc_data.topics`` texts in sorted key order: the training topics, or the held-out ones."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    keep = [k for k in keys if (k in HELD_OUT_TOPICS) == held_out]
    return [topics[k] for k in keep]


def corpus() -> tuple[str, str]:
    return code_text(), "\n\n".join(prose_topics())


def tokenizer_from(path: Path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))


def train_one(name: str, arch: dict, ids, steps: int, lr: float, out: Path, log) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(**COMMON, **arch)
    model = LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    gen = torch.Generator().manual_seed(SEED)
    n = ids.numel() - SEQ_LEN - 1
    t0 = time.monotonic()
    losses = []
    model.train()
    for step in range(steps):
        frac = step / max(1, steps - 1)
        for g in opt.param_groups:  # linear warm-up (20 steps), cosine decay to 10 %
            g["lr"] = lr * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        starts = torch.randint(0, n, (BATCH,), generator=gen)
        x = torch.stack([ids[s:s + SEQ_LEN + 1] for s in starts.tolist()])
        logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            log(f"{name}: step {step}/{steps} loss {loss.item():.3f} ({time.monotonic() - t0:.0f} s)")
    model.eval()
    path = out / name
    path.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(str(path), safe_serialization=True)
    cfg = json.loads((path / "config.json").read_text())
    cfg["torch_dtype"] = "bfloat16"
    (path / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return {"parameters": n_params, "steps": steps, "lr": lr, "final_loss_mean_last_20": round(sum(losses[-20:]) / len(losses[-20:]), 4),
            "seconds": round(time.monotonic() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--steps-target", type=int, default=400)
    ap.add_argument("--steps-draft", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-target", action="store_true",
                    help="keep the target already in --out (it does not depend on the draft)")
    args = ap.parse_args(argv)

    import torch

    from calculator.crosscheck.tiny_models import write_tokenizer

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    tok_dir = args.out / "tokenizer"
    write_tokenizer(tok_dir)
    tok = tokenizer_from(tok_dir)
    code, prose = corpus()
    digest = hashlib.sha256((code + "\0" + prose).encode()).hexdigest()
    code_ids = tok(code).input_ids
    prose_ids = tok(prose).input_ids
    # equal parts code and prose (the longer one is cut)
    k = min(len(code_ids), len(prose_ids))
    ids = torch.tensor(code_ids[:k] + [2] + prose_ids[:k], dtype=torch.long)

    def log(msg: str) -> None:
        print(msg, flush=True)

    log(f"corpus: {len(code_ids)} code + {len(prose_ids)} prose tokens, {k} of each used; sha256 {digest[:16]}")
    manifest = {"seed": SEED, "python": sys.version.split()[0], "torch": torch.__version__,
                "corpus_sha256": digest, "tokens_each": k, "seq_len": SEQ_LEN, "batch": BATCH,
                "code_modules": CODE_MODULES, "prose": "pydoc_data.topics minus HELD_OUT_TOPICS",
                "models": {}}
    old = args.out / "MANIFEST.json"
    if args.skip_target and old.exists():
        manifest["models"]["target"] = json.loads(old.read_text())["models"]["target"]
    else:
        manifest["models"]["target"] = train_one("target", TARGET, ids, args.steps_target, 3e-3, args.out, log)
    code_only = torch.tensor(code_ids[:2 * k], dtype=torch.long)  # as many tokens as the target saw, all code
    manifest["models"]["draft"] = train_one("draft", DRAFT, code_only, args.steps_draft, 5e-3, args.out, log)
    manifest["models"]["draft"]["data"] = "code half only"
    for name in ("target", "draft"):  # each checkpoint carries the tokenizer vLLM loads with it
        for f in tok_dir.iterdir():
            (args.out / name / f.name).write_bytes(f.read_bytes())
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(json.dumps(manifest["models"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
