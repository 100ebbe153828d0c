"""Workload sets for validation runs, the trained draft/target pair, and the presets the form offers.

A validation run sends the same prompts to the baseline and the speculation phase. Which prompts matters:
acceptance depends on how predictable the text is, so the run's workload set is chosen on the form.

* ``random`` — vLLM's own ``random`` dataset (``vllm bench serve --dataset-name random``): random token
  ids, the previous behaviour, for any model.
* ``code`` — chunks of standard-library modules that the trained pair never saw (``HELD_OUT_MODULES`` of
  ``validator.train_pair``).
* ``prose`` — held-out topics of the Python documentation shipped as ``pydoc_data.topics``.
* ``repetitive`` — a few held-out code lines, each repeated to fill the prompt (logs, tables, boilerplate):
  what ngram (prompt lookup) speculation is for.

Text workloads are written as the JSONL file of vLLM's ``custom`` dataset
(``vllm/benchmarks/datasets/datasets.py`` ``CustomDataset``: one ``{"prompt": ...}`` per line), cut to
``input_len`` tokens with the model's own tokenizer, and sent with ``--skip-chat-template`` (base models).
The text comes from the interpreter running the worker, so it is there offline on any machine.

The trained pair (``validator/pair``, written by ``python -m validator.train_pair``): built-in model ids
``trained-pair/llama-target`` (4 layers, 1.7 M trained parameters) and ``trained-pair/llama-draft`` (1 layer,
70 k parameters), same tokenizer.

**The served target is padded** (``served_target``), and every run on it says so (``served_target_note``:
the verdict's caveat and the run page's "What ran"): its MLPs get ``SERVED_INTERMEDIATE`` neurons instead of
the trained 512; the extra neurons' ``down_proj`` columns are zero, so they add nothing and the model
computes what was trained (tests/test_validator_pair.py compares the logits). Why: unpadded, the 6.6 MiB
float32 model sits in the CPU's cache and a decode step (about 3 ms) is mostly the engine's fixed per-step
cost, which speculation does not reduce: measured on this 2-core host, ngram on repetitive text at 54 %
acceptance moved the time per output token from about 2.9 to 2.5 ms, and repeats under a second long left
both unpadded runs inconclusive (README "Validation runs"; ``benchmarks/validation_repeatability.py
--unpadded`` measures it again). Padded, a decode step reads 146 MiB of float32
weights (memory-bound at a batch of 4, as decode is for real models on a GPU) and verifying ``k + 1``
tokens per request costs compute in proportion: the trade-off speculation makes, at the cost of a
38 M-parameter model. The padded checkpoint is written on first use to
``VAR_DIR/models/trained-pair-target-wide`` (seeded; bfloat16 on disk, served as float32).
``SERVE_PADDED = False`` (the benchmark's ``--unpadded``) serves the trained target as trained.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

PAIR_DIR = Path(__file__).resolve().parent / "pair"
PAIR_TARGET = "trained-pair/llama-target"
PAIR_DRAFT = "trained-pair/llama-draft"
PAIR_MODELS = {PAIR_TARGET: PAIR_DIR / "target", PAIR_DRAFT: PAIR_DIR / "draft"}

WORKLOADS: dict[str, str] = {
    "random": "random token ids (vLLM's random dataset)",
    "code": "Python standard-library source the model never saw",
    "prose": "Python documentation prose the model never saw",
    "repetitive": "repeated lines (logs, tables, boilerplate)",
}
TEXT_WORKLOADS = ("code", "prose", "repetitive")


def is_pair_model(model_id: str | None) -> bool:
    return model_id in PAIR_MODELS


SERVED_INTERMEDIATE = 16384  # the served target's MLP width (trained: 512); see the module docstring
WIDE_SEED = 0


SERVE_PADDED = True  # False: serve the trained target as trained (benchmarks/validation_repeatability.py --unpadded)


def pair_path(model_id: str) -> Path:
    """Local directory vLLM loads for a trained-pair model id (the target: its padded copy, written on
    first use, unless ``SERVE_PADDED`` is off). Raises KeyError for another id."""
    if model_id == PAIR_TARGET and SERVE_PADDED:
        return served_target()
    return PAIR_MODELS[model_id]


def pair_config(model_id: str) -> dict[str, Any]:
    """The ``config.json`` vLLM loads for a trained-pair model (the target's with the served MLP width)."""
    cfg = json.loads((PAIR_MODELS[model_id] / "config.json").read_text())
    if model_id == PAIR_TARGET and SERVE_PADDED:
        cfg["intermediate_size"] = SERVED_INTERMEDIATE
    return cfg


def served_target(root: Path | None = None) -> Path:
    """Write (once) and return the padded target: the trained weights, each MLP's ``gate_proj``/``up_proj``
    extended with seeded N(0, 0.02) rows and ``down_proj`` with zero columns up to ``SERVED_INTERMEDIATE``."""
    import shutil

    if root is None:
        from django.conf import settings

        root = Path(settings.VAR_DIR) / "models"
    src = PAIR_MODELS[PAIR_TARGET]
    out = root / "trained-pair-target-wide"
    stamp = f"{(src / 'model.safetensors').stat().st_size}-{SERVED_INTERMEDIATE}-{WIDE_SEED}"
    if (out / ".complete").exists() and (out / ".complete").read_text() == stamp:
        return out
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(src / "model.safetensors"))
    gen = torch.Generator().manual_seed(WIDE_SEED)
    for name in sorted(tensors):
        t = tensors[name]
        if name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            extra = torch.randn(SERVED_INTERMEDIATE - t.shape[0], t.shape[1], generator=gen) * 0.02
            tensors[name] = torch.cat([t, extra.to(t.dtype)], 0).contiguous()
        elif name.endswith("mlp.down_proj.weight"):
            extra = torch.zeros(t.shape[0], SERVED_INTERMEDIATE - t.shape[1], dtype=t.dtype)
            tensors[name] = torch.cat([t, extra], 1).contiguous()
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp / f.name)
    (tmp / "config.json").write_text(json.dumps(pair_config(PAIR_TARGET), indent=2, sort_keys=True) + "\n")
    (tmp / ".complete").write_text(stamp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def llama_parameters(cfg: dict[str, Any]) -> int:
    """Parameter count of a Llama ``config.json`` (tied or untied embeddings, no biases): embeddings +
    per layer (q, k, v, o projections, gate/up/down MLP, two RMSNorms) + the final norm."""
    h, layers, inter = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h
    emb = cfg["vocab_size"] * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return emb + layers * per_layer + h


def served_target_note(model_id: str | None) -> dict[str, Any] | None:
    """What a run on the trained pair's target must say about the model that ran: it is padded (module
    docstring). ``None`` for any other model. Returns ``{"trained_parameters", "served_parameters",
    "served_weight_mib" (float32), "short" (the sentence every verdict carries), "what" and "why" (the run
    page's plain statement)}``; the counts come from the two ``config.json`` files (``llama_parameters``)."""
    if model_id != PAIR_TARGET or not SERVE_PADDED:
        return None
    trained = json.loads((PAIR_MODELS[PAIR_TARGET] / "config.json").read_text())
    served = pair_config(PAIR_TARGET)
    n_tr, n_sv = llama_parameters(trained), llama_parameters(served)
    mib = n_sv * 4 / 2**20
    return {
        "trained_parameters": n_tr, "served_parameters": n_sv, "served_weight_mib": mib,
        "short": (f"Measured on the trained target padded to the decode cost of a {n_sv / 1e6:.1f} M-parameter "
                  f"model (zero-output MLP neurons: the trained model's outputs, a costlier step); not a production model."),
        "what": (f"The target that ran is padded. {PAIR_TARGET} has {n_tr / 1e6:.2f} M trained parameters; vLLM "
                 f"served a copy whose MLPs have {served['intermediate_size']:,} neurons instead of the trained "
                 f"{trained['intermediate_size']:,}. The added neurons' output weights (down_proj columns) are "
                 f"zero, so it computes the trained model's outputs (up to float rounding) and acceptance is the trained pair's; "
                 f"but each decode step reads {n_sv / 1e6:.1f} M float32 parameters ({mib:.0f} MiB), the cost "
                 f"of a {n_sv / 1e6:.0f} M-parameter model. The speedups and slowdowns measured here are those of "
                 f"a model of that cost on this CPU, not of any production model."),
        "why": (f"Why: unpadded, the {n_tr * 4 / 2**20:.1f} MiB float32 model sits in the CPU's cache and a decode "
                "step (about 3 ms) is mostly vLLM's fixed per-step cost (scheduling, sampling, streaming), which "
                "speculation does not reduce: the time per output token barely moves, and a repeat lasts under a "
                "second, so a hiccup of the shared host decides the verdict (two unpadded runs were inconclusive: "
                "README, Validation runs; benchmarks/validation_repeatability.py --unpadded). Padded, a step is "
                "dominated by reading the weights, as decode is for real models on a GPU, and verifying k drafted "
                "tokens costs compute in proportion: the trade-off speculative decoding makes."),
    }


def _texts(workload: str) -> list[str]:
    from .train_pair import HELD_OUT_MODULES, prose_topics, stdlib_dir

    if workload == "prose":
        return prose_topics(held_out=True)
    sources = [(stdlib_dir() / f"{m}.py").read_text(encoding="utf-8") for m in HELD_OUT_MODULES]
    if workload == "code":
        return sources
    if workload == "repetitive":
        lines = sorted({ln for src in sources for ln in src.splitlines() if 24 <= len(ln.strip()) <= 60
                        and not ln.strip().startswith("#")})
        return [ln + "\n" for ln in lines]
    raise KeyError(workload)


def prompts(workload: str, tokenizer_dir: str | Path, input_len: int, n: int, seed: int) -> list[str]:
    """``n`` distinct prompts of ``input_len`` tokens (with the tokenizer in ``tokenizer_dir``) from a text workload
    (a run sends each to a server once: ``validator.bench_serve_entry.UniquePrompts``).

    Deterministic for a given ``seed`` and interpreter. Raises ``KeyError`` for an unknown workload,
    ``ValueError`` when the workload's text holds fewer than ``n`` distinct prompts of that length."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    rng = random.Random(seed)
    texts = _texts(workload)
    out: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise ValueError(f"the {workload} workload gave {len(out)} distinct prompts of {input_len} tokens, "
                             f"not the {n} this run sends")
        if workload == "repetitive":
            block = "".join(rng.sample(texts, 2))  # two lines, repeated
            text = block * (input_len // max(1, len(tok(block).input_ids)) + 2)
        else:
            src = rng.choice(texts)
            lines = src.splitlines(keepends=True)
            start = rng.randrange(max(1, len(lines) - 40))
            text = "".join(lines[start:start + 200])
        ids = tok(text, add_special_tokens=False).input_ids
        if len(ids) < input_len:
            continue
        prompt = tok.decode(ids[:input_len])
        if prompt not in seen:
            seen.add(prompt)
            out.append(prompt)
    return out


def write_dataset(workload: str, tokenizer_dir: str | Path, input_len: int, n: int, seed: int, path: Path) -> Path:
    """Write the prompts as vLLM's ``custom`` dataset (JSONL, ``{"prompt": ...}`` per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in prompts(workload, tokenizer_dir, input_len, n, seed):
            f.write(json.dumps({"prompt": p}) + "\n")
    return path


def dataset_args(workload: str, profile: dict[str, Any], dataset_path: Path | None) -> list[str]:
    """The ``vllm bench serve`` dataset flags for a workload (``random``: vLLM's random dataset)."""
    if workload == "random":
        return ["--dataset-name", "random", "--random-input-len", str(profile["input_len"]),
                "--random-output-len", str(profile["output_len"])]
    assert dataset_path is not None
    return ["--dataset-name", "custom", "--dataset-path", str(dataset_path), "--custom-output-len",
            str(profile["output_len"]), "--skip-chat-template"]


def _spec(method: str, k: int) -> str:
    if method == "ngram":
        return json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3,
                           "prompt_lookup_min": 2}, separators=(",", ":"))
    return json.dumps({"method": "draft_model", "model": PAIR_DRAFT, "num_speculative_tokens": k},
                      separators=(",", ":"))


def _preset(workload: str, method: str, k: int, concurrency: int | None = None) -> dict[str, Any]:
    params = {"model": PAIR_TARGET, "gpu": "CPU", "speculative_config": _spec(method, k), "validation_workload": workload}
    label = f"{workload}: {'draft model' if method == 'draft_model' else 'ngram'} k={k}"
    if concurrency:
        params["concurrency"] = str(concurrency)
        label += f", {concurrency} in flight"
    key = f"{workload}-{method}-{k}" + (f"-c{concurrency}" if concurrency else "")
    return {"key": key, "workload": workload, "label": label, "params": params}


# What the form offers: the trained pair on the CPU with a workload set and a speculative method (4 requests
# in flight unless said). Measured on the 2-core host (benchmarks/validation_repeatability.py --all, README
# "Validation runs"): the draft model and ngram speed up code and repetitive text by 20-45 %; a large k on
# prose with 8 requests in flight is slower (-19 %, 17 % acceptance: verifying 8 x 17 tokens a step costs more
# than the ~2.7 accepted tokens per request save); ngram on prose is slightly slower (-4 %, 11 % acceptance).
PRESETS: list[dict[str, Any]] = [
    _preset("code", "draft_model", 3), _preset("repetitive", "ngram", 3), _preset("code", "ngram", 3),
    _preset("repetitive", "draft_model", 3), _preset("prose", "draft_model", 5),
    _preset("prose", "draft_model", 16, concurrency=8), _preset("prose", "ngram", 5),
]
