"""``python manage.py estimate``: what vLLM will log at startup, per GPU, for a model and vLLM flags."""
from __future__ import annotations

import json
import shlex

from django.core.management.base import BaseCommand

from calculator.cli import OneLineErrors, command_error, internal_error, request_from_command, verdict_exit
from calculator.engine import perf
from calculator.engine.schemas import EstimateResult
from calculator.plan import make_plan
from calculator.request import InputError, add_request_arguments, gpu_choice_note
from calculator.web.results import api_payload
from calculator.runtimes import get_runtime


def _workload_text(speed: dict) -> str:
    """The workload the speed figures are for, in vllm bench serve's terms."""
    if speed.get("request_rate") is not None:
        who = (f"{speed['request_rate']:g} requests/s, Poisson arrivals (--request-rate), {speed['num_prompts']:,} prompts"
               + (f", --max-concurrency {speed['concurrency']:,}" if speed['concurrency'] < speed['num_prompts'] else "")
               + (f": {speed['mean_in_flight']:g} in flight on average" if speed.get("mean_in_flight") is not None
                  else "") + (", saturated" if speed.get("saturated") else ""))
    else:
        who = (f"{speed['concurrency']} prompts at once (--num-prompts, --request-rate inf)"
               if speed.get("arrival") == "burst" else f"concurrency {speed['concurrency']}")
    return f"prompt {speed['prompt_len']}, output {speed['output_len']}, {who}"


def render_runtime_table(mem, info: dict, speed: dict | None = None, verdict=None) -> str:
    """The table of a runtime whose memory plan is not vLLM's (``mem.rows()``: label, value, source): what that
    runtime logs, the speed when predicted, the verdict and the command(s)."""
    ollama = (getattr(mem, "ollama", None) or {}).get("release")  # Ollama's own release, over llama.cpp's rules
    release = f"Ollama {ollama} (llama.cpp rules: {mem.release})" if ollama else mem.release
    lines = [f"Model: {info['model']}" + (f" @ {info['sha'][:12]}" if info.get("sha") else ""),
             f"Config from: {info['source']}", f"GPU: {mem.gpu}", f"Release: {release}"]
    types = getattr(mem, "gguf_types", None)  # llama.cpp without a GGUF file: which llama-quantize types fit
    for label, value, source in mem.rows() + (types.cli_rows() if types is not None else []):
        if isinstance(value, float):  # as the runtimes log them: 2 decimals, small fractions to 4 figures
            value = f"{value:.2f}" if abs(value) >= 1 else f"{value:.4g}"
        lines.append(f"{label}" if value == "" else f"{label}: {value}" + (f"  ({source})" if source else ""))
    if speed and speed.get("itl_ms") is not None:
        at = _workload_text(speed)
        with_spec = bool(speed.get("speed_with_speculation"))  # which server the three figures describe
        plain = " (without speculation)" if info.get("speculative") and not with_spec else ""
        if speed.get("ttft_ms") is not None:
            lines.append(f"Predicted TTFT: {speed['ttft_ms']:.1f} ms ({at}){plain}")
        tps = speed["output_tokens_per_s"]  # None without a TTFT (llama.cpp on a GPU without TFLOP/s: warnings say)
        lines += [f"Predicted time per output token: {speed['itl_ms']:.2f} ms{plain}{_likely_text(speed)}",
                  ("Predicted output throughput: not given (it needs the TTFT)" if tps is None else
                   f"Predicted output throughput: {tps:,.0f} tok/s{plain}"
                   + (" (a best case, as the TPOT)" if speed.get("itl_ms_likely") else ""))]
        acc_src = acceptance_source(speed)
        if speed.get("spec_speedup") is not None:
            be = speed["break_even_acceptance_rate"]
            spec_tps = speed.get("output_tokens_per_s_spec")
            times = ("the times above" if with_spec else
                     f"{speed['itl_ms_spec']:.2f} ms per output token"
                     + ("" if spec_tps is None else f", {spec_tps:,.0f} tok/s")
                     if speed.get("itl_ms_spec") is not None else "")  # llama.cpp: its own keys for these
            lines.append(f"With speculative decoding{f' ({times})' if times else ''}: speedup {_speedup_text(speed)}, "
                         f"mean acceptance length {speed['mean_acceptance_length']:.2f} ({acc_src}); break-even acceptance "
                         "rate " + (f"{be:.2f}" if be is not None else "none (never pays at this concurrency)")
                         + (f"; best num_speculative_tokens here {speed['best_num_speculative_tokens']}"
                            + (" (no k pays: serve without speculation)" if speed["best_num_speculative_tokens"] == 0
                               else "")
                            if speed.get("best_num_speculative_tokens") is not None else "")
                         + _stops_paying_text("; ", speed))
        elif info.get("speculative"):
            be = speed.get("break_even_acceptance_rate")
            lines.append(f"With speculative decoding: speedup not predicted ({acc_src}); "
                         + (f"it pays above an acceptance rate of {be:.2f}" if be is not None
                            else "it never pays at this concurrency"))
    elif speed and speed.get("speed_error"):
        lines.append(f"Speed: {speed['speed_error']}")
    if verdict is not None:
        lines.append(f"Verdict: {verdict.text}: {verdict.headline}")
        if verdict.condition and verdict.condition not in verdict.headline:  # "works if <condition>" says it once
            lines.append(f"  condition: {verdict.condition}")
        lines += [f"  would work with: {s.label}" for s in verdict.suggestions]
    if speed and speed.get("serve_argv"):
        lines.append(f"Command: {shlex.join(speed['serve_argv'])}")
        if speed.get("client_argv"):
            lines.append(f"  then: {shlex.join(speed['client_argv'])}")
    for w in [*info.get("notes", []), *getattr(mem.plan, "notes", []), *((speed or {}).get("speed_warnings") or [])]:
        lines.append(f"note: {w}")
    return "\n".join(lines)


def render_table(res: EstimateResult, info: dict, speed: dict | None = None, verdict=None) -> str:
    """A readable per-GPU table; GiB = 2**30 bytes, times in ms."""
    if not isinstance(res, EstimateResult) and hasattr(res, "rows") and hasattr(res, "plan"):
        return render_runtime_table(res, info, speed, verdict)
    rows = [
        ("Model", f"{info['model']}" + (f" @ {info['sha'][:12]}" if info.get("sha") else "")),
        ("Config from", info["source"]),
        ("GPU", f"{res.gpu} ({res.total_memory_gib} GiB as the driver reports it)"),
        *([("Layout", info["layout"])] if info.get("layout") else []),
        ("vLLM release", res.vllm_version),
        ("gpu_memory_utilization", f"{res.resolved.get('gpu_memory_utilization')} -> budget {res.requested_memory_gib} GiB"),
        ("Model loading took (weights)", f"{res.weights_gib} GiB"),
        ("  draft model weights", f"{res.draft_weights_gib} GiB"),
        ("Activation peak", f"{res.activation_peak_gib} GiB"),
        ("Non-torch memory", f"{res.non_torch_gib} GiB"),
        ("CUDA graph memory", f"{res.cuda_graph_gib} GiB ({'deducted' if res.cuda_graph_deducted else 'not deducted'})"),
        *([("Available KV cache memory", f"{res.resolved['kv_cache_capacity_gib']} GiB (the capacity vLLM reserves "
            "and logs before warmup)"), ("  sized after warmup", f"{res.available_kv_cache_gib} GiB (the extensible "
                                        "KV cache: what the lines below come from)")]
          if res.resolved.get("kv_cache_capacity_gib") is not None else
          [("Available KV cache memory", f"{res.available_kv_cache_gib} GiB" if res.available_kv_cache_gib >= 0
            else f"none (short by {-res.available_kv_cache_gib:.2f} GiB)")]),
        ("KV cache size", f"{res.kv_cache_tokens:,} tokens ({res.num_gpu_blocks:,} blocks of {res.block_size})"),
        (f"Maximum concurrency for {res.max_model_len:,} tokens", f"{res.max_concurrency:.2f}x"),
        ("KV bytes per token (this GPU)", f"{res.kv_bytes_per_token:,} B"),
    ]
    for lk in res.kv_by_layer_type:
        label = f"  {'draft ' if lk.draft else ''}{lk.kind} x{lk.num_layers}"
        value = f"{lk.bytes_per_token:,} B/token" if lk.bytes_per_token else f"{lk.state_bytes_per_request:,} B/request"
        rows.append((label, f"{value}  ({lk.detail})"))
    compat = (speed or {}).get("compat") or {}
    if compat.get("requested_backend"):
        rows.append(("Attention backend", f"{compat['requested_backend']} (requested): "
                     + ("works" if compat.get("ok") else "depends" if compat.get("ok") is None else "does not work")
                     + (f"; runs as {compat['runs_as']}" if compat.get("runs_as") else "")))
    elif compat.get("auto_selected"):
        rows.append(("Attention backend", f"{compat['auto_selected']} (vLLM's choice; manage.py check_compat "
                                          "for every backend and why)"))
    if speed and speed.get("speed_error"):
        rows.append(("Speed", speed["speed_error"]))
    elif speed and speed.get("ttft_ms") is not None:
        at = _workload_text(speed)
        speculative = bool(info.get("speculative"))
        base_only = speculative and not speed.get("speed_with_speculation")  # speculation without an acceptance
        also = " (without speculation: its speedup needs --acceptance-rate)" if base_only else ""
        rows += [("Predicted TTFT", f"{speed['ttft_ms']:.1f} ms ({at})"),
                 ("Predicted ITL (TPOT)", f"{speed['itl_ms']:.2f} ms per output token{also}{_likely_text(speed)}"),
                 ("Predicted output throughput", f"{speed['output_tokens_per_s']:,.0f} tok/s{also}"
                  + (" (a best case, as the TPOT)" if speed.get("itl_ms_likely") else ""))]
        if speed.get("efficiency_label"):
            rows.append(("  efficiency", speed.get("efficiency_precision")
                         or perf.PRECISION.get(speed["efficiency_label"], perf.PRECISION["assumed"])))
        if speculative:
            al, be = speed["mean_acceptance_length"], speed["break_even_acceptance_rate"]
            src = acceptance_source(speed)
            rows += [("  mean acceptance length", (f"{al:.2f}" if al is not None else "unknown")
                      + (f" ({src})" if src else " (give --acceptance-rate)" if al is None else "")),
                     ("  speedup from speculation", _speedup_text(speed)),
                     ("  break-even acceptance rate", f"{be:.2f} per drafted token" if be is not None
                      else "never pays at this concurrency")]
            if speed.get("best_num_speculative_tokens") is not None:
                rows.append(("  best num_speculative_tokens", str(speed["best_num_speculative_tokens"])
                             + " at this concurrency"
                             + (" (no k pays: serve without speculation)"
                                if speed["best_num_speculative_tokens"] == 0 else "")))
            if speed.get("spec_stops_paying_above_concurrency") and not speed.get("spec_pays_from_concurrency"):
                rows.append(("  stops paying above", f"{speed['spec_stops_paying_above_concurrency']} concurrent "
                                                     "requests"))
            elif speed.get("spec_speedup") is not None and _stops_paying_text("", speed):
                rows.append(("  where it pays", _stops_paying_text("", speed)))
    if speed and speed.get("serve_argv"):
        rows.append(("Command", shlex.join(speed["serve_argv"])))
    if verdict is not None:
        rows.append(("Verdict", f"{verdict.text}: {verdict.headline}"))
        rows += [("  also", r) for r in verdict.reasons[1:]]
        if verdict.condition and verdict.condition not in verdict.headline:  # "works if <condition>" says it once
            rows.append(("  condition", verdict.condition))
        rows += [("  would work with", s.label) for s in verdict.suggestions]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    for w in [*info.get("notes", []), *res.warnings, *((speed or {}).get("speed_warnings") or [])]:
        lines.append(f"note: {w}")
    return "\n".join(lines)


def acceptance_source(speed: dict) -> str:
    """Where the acceptance behind a speculative answer comes from, as the page and the JSON cite it
    (``speed_sources.acceptance_rate``; llama.cpp's ``acceptance_source``); ``""`` without one."""
    return (speed.get("speed_sources") or {}).get("acceptance_rate") or speed.get("acceptance_source") or ""


def _likely_text(speed: dict) -> str:
    """``: a best case, 9.46-12.9 ms more likely (...)`` when the answer holds a TPOT range more likely than its headline
    figure (``itl_ms_likely``: MLA attention outside the fitted runs, ``speed_sources['itl_ms.mla_likely']``), else
    ``""``."""
    likely = speed.get("itl_ms_likely")
    if not likely:
        return ""
    return (f": a best case, {likely[0]:.3g}-{likely[1]:.3g} ms more likely (MLA attention, outside the runs the speed "
            "was fitted on: see the note)")


def _stops_paying_text(sep: str, speed: dict | None = None) -> str:
    """Where speculation pays along concurrency (:func:`calculator.engine.perf.paying_text`: stops paying above N,
    pays only from N, a dip or a hump, pays at no concurrency, or does not stop paying up to the server's limit), as
    one clause after ``sep``; ``""`` without a figure."""
    from calculator.engine.perf import paying_text

    speed = speed or {}
    text = paying_text(speed.get("spec_stops_paying_above_concurrency"), speed.get("spec_pays_from_concurrency"),
                       speed.get("spec_concurrency_limit"), speed.get("spec_concurrency_limit_reason"))
    return f"{sep}{text}" if text else ""


def _speedup_text(speed: dict) -> str:
    """``1.04x (range 0.90-1.18, slowdown possible)`` from an answer's speculative keys; ``unknown`` without one."""
    sp, lo, hi = speed.get("spec_speedup"), speed.get("spec_speedup_low"), speed.get("spec_speedup_high")
    if sp is None:
        return "unknown"
    out = f"{sp:.2f}x"
    if lo is not None and hi is not None:
        level = speed.get("spec_slowdown")
        out += f" (range {lo:.2f}-{hi:.2f}" + (f", slowdown {level}" if level else "") + ")"
    return out


def _text_only(plan, payload: dict) -> dict:
    """What the table says beyond the JSON keys (which stay fixed): the speculative server's concurrency limit
    (``spec_concurrency_limit`` and its reason) and the TPOT range more likely than the headline figure
    (``itl_ms_likely``, of the server the headline figures describe, as the page shows it)."""
    from calculator.web.results import speed_figures

    spec = getattr(plan.speed, "spec", None)
    figures = speed_figures(plan.speed) if payload.get("itl_ms") is not None else None
    which = (figures or {}).get("spec" if payload.get("speed_with_speculation") else "plain") or {}
    return {"spec_concurrency_limit": getattr(spec, "concurrency_limit", None),
            "spec_concurrency_limit_reason": getattr(spec, "concurrency_limit_reason", None),
            "itl_ms_likely": which.get("itl_ms_likely")}


class Command(OneLineErrors, BaseCommand):
    help = ("Predict what the runtime logs at start-up per GPU (weights, KV cache tokens, max concurrency), whether "
            "the configuration works, and its speed. Exit status of the table: 0 works, 1 does not fit / does not "
            "start, 3 depends on a condition; --format json exits 0 with the verdict in its 'verdict' key; "
            "2 bad input.")

    def add_arguments(self, parser):
        add_request_arguments(parser, exclude=())  # with --compare-vllm-version (the release comparison)
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args, **options):
        request, local = request_from_command(options)
        # the newest calibration of each (runtime, GPU) from finished validation runs, as the web and worker processes
        # install them on each request (validator.apps): a command runs without a request
        from validator.calibration import apply_latest

        apply_latest(force=True)
        try:
            plan = make_plan(request, local)
            notes = [n for n in [gpu_choice_note(options)] if n]  # the card a missing or short --gpu left open
            payload = api_payload(plan, notes)
        except InputError as exc:
            raise command_error(exc, request.runtime) from None
        except Exception as exc:  # noqa: BLE001 - never a traceback on the command line
            raise internal_error(exc) from None
        if options["format"] == "json":
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            kw = get_runtime(plan.runtime).speed_kwargs(request)
            info = {"model": plan.model.repo_id, "sha": plan.model.sha, "source": plan.model.source,
                    "notes": [*notes, *plan.model.notes], "layout": request.layout,
                    "speculative": request.speculative_config is not None}
            self.stdout.write(render_table(plan.memory, info, {**payload, **kw, **_text_only(plan, payload)},
                                           plan.verdict))
            if payload.get("release_comparison") is not None:
                from calculator.release_comparison import ReleaseComparison, render_text

                self.stdout.write("\n" + render_text(ReleaseComparison(**payload["release_comparison"])))
        if plan.verdict.exit_status and options["format"] == "table":
            raise verdict_exit(plan.verdict.status, plan.verdict.headline, plan.verdict.exit_status)
