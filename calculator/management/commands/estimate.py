"""``python manage.py estimate``: what vLLM will log at startup, per GPU, for a model and vLLM flags."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from calculator.cli import CLIInputError, add_engine_arguments, engine_input_from_options
from calculator.engine import EngineInputError, estimate
from calculator.engine.perf import speed_fields
from calculator.engine.schemas import EstimateResult


def render_table(res: EstimateResult, info: dict, speed: dict | None = None) -> str:
    """A readable per-GPU table; GiB = 2**30 bytes, times in ms."""
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
    if speed:
        at = f"prompt {speed['prompt_len']}, output {speed['output_len']}, concurrency {speed['concurrency']}"
        rows += [("Predicted TTFT", f"{speed['ttft_ms']:.1f} ms ({at})"),
                 ("Predicted ITL (TPOT)", f"{speed['itl_ms']:.2f} ms per output token"),
                 ("Predicted output throughput", f"{speed['output_tokens_per_s']:,.0f} tok/s")]
        if "spec_speedup" in speed:
            al, sp, be = speed["mean_acceptance_length"], speed["spec_speedup"], speed["break_even_acceptance_rate"]
            rows += [("  mean acceptance length", f"{al:.2f}" if al is not None else "unknown (give --acceptance-rate)"),
                     ("  speedup from speculation", f"{sp:.2f}x" if sp is not None else "unknown"),
                     ("  break-even acceptance rate", f"{be:.2f} per drafted token" if be is not None
                      else "never pays at this concurrency")]
    rows.append(("Fits", "yes" if res.fits else "NO"))
    if res.reason:
        rows.append(("Why not", res.reason))
    if res.suggestion:
        rows.append(("Smallest change", res.suggestion))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    for w in [*info.get("notes", []), *res.warnings, *((speed or {}).get("speed_warnings", []))]:
        lines.append(f"note: {w}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Predict vLLM's startup memory figures (weights, KV cache tokens, max concurrency) per GPU."

    def add_arguments(self, parser):
        add_engine_arguments(parser)
        parser.add_argument("--format", choices=["table", "json"], default="table")
        speed = parser.add_argument_group("speed prediction (defaults: vllm bench serve --dataset-name random)")
        speed.add_argument("--prompt-len", type=int, default=1024, help="prompt tokens per request")
        speed.add_argument("--output-len", type=int, default=128, help="output tokens per request")
        speed.add_argument("--concurrency", type=int, default=1, help="requests in flight (--max-concurrency)")
        speed.add_argument("--acceptance-rate", type=float,
                           help="speculative decoding: acceptance rate per drafted token, 0 to 1 "
                                "(overrides the public typical figure)")

    def handle(self, *args, **options):
        try:
            inp, info = engine_input_from_options(options)
            res = estimate(inp)
            speed = speed_fields(inp, res, options["prompt_len"], options["output_len"], options["concurrency"],
                                 options.get("acceptance_rate"))
        except CLIInputError as exc:
            raise CommandError(f"{exc.field}: {exc.message}", returncode=2) from None
        except EngineInputError as exc:
            raise CommandError(f"{exc.field}: {exc.message}", returncode=2) from None
        if options["format"] == "json":
            out = res.to_json()
            out["model_source"] = info["source"]
            out["revision_sha"] = info.get("sha")
            out["model_notes"] = info.get("notes", [])
            out.update(speed)
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(render_table(res, info, {**speed, "prompt_len": options["prompt_len"],
                                                       "output_len": options["output_len"],
                                                       "concurrency": options["concurrency"]}))
