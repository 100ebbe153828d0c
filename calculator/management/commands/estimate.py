"""``python manage.py estimate``: what vLLM will log at startup, per GPU, for a model and vLLM flags."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from calculator.cli import CLIInputError, add_engine_arguments, engine_input_from_options
from calculator.engine import EngineInputError, estimate
from calculator.engine.schemas import EstimateResult


def render_table(res: EstimateResult, info: dict) -> str:
    """A readable per-GPU table; GiB = 2**30 bytes."""
    rows = [
        ("Model", f"{info['model']}" + (f" @ {info['sha'][:12]}" if info.get("sha") else "")),
        ("Config from", info["source"]),
        ("GPU", f"{res.gpu} ({res.total_memory_gib} GiB as the driver reports it)"),
        ("vLLM release", res.vllm_version),
        ("gpu_memory_utilization", f"{res.resolved.get('gpu_memory_utilization')} -> budget {res.requested_memory_gib} GiB"),
        ("Model loading took (weights)", f"{res.weights_gib} GiB"),
        ("  draft model weights", f"{res.draft_weights_gib} GiB"),
        ("Activation peak", f"{res.activation_peak_gib} GiB"),
        ("Non-torch memory", f"{res.non_torch_gib} GiB"),
        ("CUDA graph memory", f"{res.cuda_graph_gib} GiB ({'deducted' if res.cuda_graph_deducted else 'not deducted'})"),
        ("Available KV cache memory", f"{res.available_kv_cache_gib} GiB"),
        ("KV cache size", f"{res.kv_cache_tokens:,} tokens ({res.num_gpu_blocks:,} blocks of {res.block_size})"),
        (f"Maximum concurrency for {res.max_model_len:,} tokens", f"{res.max_concurrency:.2f}x"),
        ("KV bytes per token (this GPU)", f"{res.kv_bytes_per_token:,} B"),
    ]
    for lk in res.kv_by_layer_type:
        label = f"  {'draft ' if lk.draft else ''}{lk.kind} x{lk.num_layers}"
        value = f"{lk.bytes_per_token:,} B/token" if lk.bytes_per_token else f"{lk.state_bytes_per_request:,} B/request"
        rows.append((label, f"{value}  ({lk.detail})"))
    rows.append(("Fits", "yes" if res.fits else "NO"))
    if res.reason:
        rows.append(("Why not", res.reason))
    if res.suggestion:
        rows.append(("Smallest change", res.suggestion))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    for w in [*info.get("notes", []), *res.warnings]:
        lines.append(f"note: {w}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Predict vLLM's startup memory figures (weights, KV cache tokens, max concurrency) per GPU."

    def add_arguments(self, parser):
        add_engine_arguments(parser)
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args, **options):
        try:
            inp, info = engine_input_from_options(options)
            res = estimate(inp)
        except CLIInputError as exc:
            raise CommandError(f"{exc.field}: {exc.message}", returncode=2) from None
        except EngineInputError as exc:
            raise CommandError(f"{exc.field}: {exc.message}", returncode=2) from None
        if options["format"] == "json":
            out = res.to_json()
            out["model_source"] = info["source"]
            out["revision_sha"] = info.get("sha")
            out["model_notes"] = info.get("notes", [])
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(render_table(res, info))
