"""The ``python -m sglang.launch_server`` command line that reproduces a planned configuration.

Flags are SGLang's own (``server_args.py`` ``add_cli_args``); the list is an argv (never a shell
string), so no value is interpreted by a shell. Only settings that differ from what SGLang would pick by
itself are pinned when ``pin_defaults`` is false; with ``pin_defaults`` (the default) the memory-relevant
values of the plan (``--mem-fraction-static``, ``--context-length``, ``--chunked-prefill-size``,
``--cuda-graph-max-bs``, ``--page-size``) are passed explicitly so that the run uses the plan's numbers
even if SGLang's defaults move. ``--chunked-prefill-size`` carries the value before SGLang's DP-attention division
(``SGLangPlan.chunked_prefill_size_arg``): SGLang divides the flag by the DP size (by 2 in 0.4.3.post4) itself.
"""
from __future__ import annotations

import json
import re

from calculator.engine.errors import EngineInputError

from .memory import SGLangPlan
from .releases import at_least

_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@:+~-]{0,300}$")


def launch_argv(plan: SGLangPlan, model_path: str, *, python: str = "python", port: int | None = None,
                pin_defaults: bool = True, draft_model_path: str | None = None,
                kv_cache_dtype: str | None = None, quantization: str | None = None,
                max_running_requests: int | None = None, trust_remote_code: bool = False,
                model_override_args: dict | None = None, allow_longer_context: bool = False) -> list[str]:
    """``[python, -m, sglang.launch_server, --model-path, ..., --tp-size, ...]`` for ``plan``.

    ``model_path``: a Hugging Face id or a local path (checked: no spaces or shell metacharacters).
    ``draft_model_path``: required for EAGLE / EAGLE3 / STANDALONE plans. ``max_running_requests``: the user's
    ``--max-running-requests``, written when given. ``trust_remote_code``: write ``--trust-remote-code`` (the release
    loads the config only through the repository's own class: :class:`.config_types.ConfigLoad` ``remote_class``).
    ``model_override_args``: written as ``--json-model-override-args`` (compact JSON, one argv item).
    ``allow_longer_context``: the command starts with ``env SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (a
    ``--context-length`` above the model's derived one).
    Raises: EngineInputError naming ``model_path`` / ``draft_model_path`` / ``port``.
    """
    for field, value in (("model_path", model_path), ("draft_model_path", draft_model_path)):
        if value is not None and not _MODEL_RE.match(value):
            raise EngineInputError(field, f"{value!r} is not a model id or path this command accepts")
    if port is not None and not 0 < port < 65536:
        raise EngineInputError("port", "must be between 1 and 65535")
    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path, "--tp-size", str(plan.tp_size)]
    new_flags = at_least(plan.release, "0.5.23")
    if new_flags and plan.enable_dp_attention and plan.dp_size > 1:
        # 0.5.23: --dp-size N --enable-dp-attention is deprecated for --attn-dp-size N
        # (sglang==0.5.23 sglang/srt/server_args.py:419, arg_groups/parallel_hook.py:39)
        argv += ["--attn-dp-size", str(plan.dp_size)]
    else:
        if plan.dp_size > 1:
            argv += ["--dp-size", str(plan.dp_size)]
        if plan.enable_dp_attention and plan.dp_size > 1:
            # (DP attention needs dp_size > 1: at dp_size 1 SGLang turns it off, _handle_data_parallelism)
            argv += ["--enable-dp-attention"]
    if plan.ep_size > 1:
        argv += ["--ep-size", str(plan.ep_size)]
    if plan.pp_size > 1:
        argv += ["--pp-size", str(plan.pp_size)]
    argv += ["--mem-fraction-static", f"{plan.mem_fraction_static:.4g}"] if pin_defaults else []
    argv += ["--context-length", str(plan.context_length)] if pin_defaults else []
    if pin_defaults:
        # 0.5.23 has no --cuda-graph-max-bs: the decode phase's is --cuda-graph-max-bs-decode
        # (sglang==0.5.23 sglang/srt/arg_groups/fields/exec_.py:629)
        # the undivided value: under DP attention SGLang divides --chunked-prefill-size by the DP size itself
        # (cite(release, "dp_chunked")), so passing the plan's per-rank figure would divide it twice
        argv += ["--chunked-prefill-size", str(plan.chunked_prefill_size_arg),
                 "--cuda-graph-max-bs-decode" if new_flags else "--cuda-graph-max-bs", str(plan.cuda_graph_max_bs)]
        if plan.page_size > 1:
            argv += ["--page-size", str(plan.page_size)]
    # SGLang's own names (server_args.py --kv-cache-dtype choices: auto, fp8_e5m2, fp8_e4m3, ...): a vLLM-style
    # "fp8" is written as the plan resolved it (fp8_e4m3), which is what was sized
    kv = plan.kv_cache_dtype if kv_cache_dtype not in (None, "auto") else (kv_cache_dtype or plan.kv_cache_dtype)
    if kv.startswith("fp8"):
        argv += ["--kv-cache-dtype", kv]
    if quantization:
        argv += ["--quantization", quantization]
    if max_running_requests is not None:
        argv += ["--max-running-requests", str(int(max_running_requests))]
    if trust_remote_code:
        argv += ["--trust-remote-code"]
    if model_override_args:
        argv += ["--json-model-override-args", json.dumps(model_override_args, separators=(",", ":"))]
    if plan.attention_backend and pin_defaults:
        argv += ["--attention-backend", plan.attention_backend]
    s = plan.speculative
    if s is not None:
        argv += ["--speculative-algorithm", s.algorithm]
        if s.algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
            if not draft_model_path:
                raise EngineInputError("draft_model_path", f"{s.algorithm} needs --speculative-draft-model-path")
            argv += ["--speculative-draft-model-path", draft_model_path]
        if s.algorithm == "NGRAM":  # its tree breadth is --speculative-ngram-max-bfs-breadth (SGLang's default)
            if s.num_draft_tokens is not None:
                argv += ["--speculative-num-draft-tokens", str(s.num_draft_tokens)]
        elif s.num_steps is not None:
            argv += ["--speculative-num-steps", str(s.num_steps), "--speculative-eagle-topk", str(s.eagle_topk),
                     "--speculative-num-draft-tokens", str(s.num_draft_tokens)]
    if port is not None:
        argv += ["--port", str(port)]
    if allow_longer_context:
        argv = ["env", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", *argv]
    return argv
