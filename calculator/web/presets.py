"""Examples a serving engineer recognises: each is a permalink of the calculator (a first answer without
typing). Every model is in the offline catalog (``calculator/data/model_configs``), so the examples answer
without the Hub. The landing page shows the first one.

The MTP example is the speculative-decoding field guide's benchmark profile ("method = MTP,
working_context = 32768, concurrency = 4", /work/shared/reference/field_guide_000_*.txt) on DeepSeek-V3,
whose config has one MTP layer (``num_nextn_predict_layers: 1``), hence ``num_speculative_tokens`` 1; the
lengths are the validator's (``validator.config.GPU_PROFILE``, :func:`profile_lengths`). Every results page offers
the same profile for its own model (:func:`mtp_profile`) when the model has an MTP head.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from functools import lru_cache


@dataclass(frozen=True)
class Preset:
    """One example: ``slug`` (stable id for tests and CSS), ``label`` (the link text), ``note`` (what it
    shows) and ``params`` (raw request parameters, as a user would type them in the query string)."""

    slug: str
    label: str
    note: str
    params: tuple[tuple[str, str], ...]

    @property
    def query(self) -> str:
        """The canonical permalink query of the example (what the page redirects to)."""
        return _canonical(self.params)


PRESETS: tuple[Preset, ...] = (
    Preset("8b-4090-32k", "Llama 3.1 8B on an RTX 4090, 32k context",
           "a single consumer card at a long context",
           (("model", "meta-llama/Llama-3.1-8B-Instruct"), ("gpu", "RTX4090"), ("max_model_len", "32768"))),
    Preset("moe-h100-fp8kv", "Qwen3 30B-A3B MoE on an H100, fp8 KV cache",
           "a mixture-of-experts model with an fp8 KV cache",
           (("model", "Qwen/Qwen3-30B-A3B"), ("gpu", "H100"), ("kv_cache_dtype", "fp8"))),
    Preset("deepseek-v3-8xh200", "DeepSeek-V3 on 8× H200",
           "MLA attention, tensor parallel across a node",
           (("model", "deepseek-ai/DeepSeek-V3"), ("gpu", "H200"), ("tensor_parallel_size", "8"))),
    Preset("mtp-profile", "MTP speculative decoding, 32k, 4 in flight (DeepSeek-V3, 8× H200)",
           "the field guide's benchmark profile: method mtp, max_model_len 32768 (32,512 in + 256 out), concurrency 4",
           (("model", "deepseek-ai/DeepSeek-V3"), ("gpu", "H200"), ("tensor_parallel_size", "8"),
            ("max_model_len", "32768"), ("concurrency", "4"), ("prompt_len", "32512"), ("output_len", "256"),
            ("speculative_config", '{"method":"mtp","num_speculative_tokens":1}'))),
    Preset("70b-on-24gb", "Llama 3.1 70B on one 24 GB card (does not fit)",
           "what the page says when it does not fit, and what would",
           (("model", "meta-llama/Llama-3.1-70B-Instruct"), ("gpu", "RTX4090"))),
)


@lru_cache(maxsize=None)
def _canonical(params: tuple[tuple[str, str], ...]) -> str:
    from calculator.request import parse_request
    from calculator.web.forms import canonical_query

    return canonical_query(parse_request(dict(params)).to_params())


def landing() -> Preset:
    """The example the landing page answers."""
    return PRESETS[0]


# --- the field guide's recorded profile, one click away for the model on the page ----------------------------
@dataclass(frozen=True)
class MtpProfile:
    """The field guide's benchmark profile for the model on the page: ``query`` (the canonical permalink: the
    user's model, GPU, parallel sizes and runtime, with method mtp, the validator's lengths and concurrency) or
    ``reason`` (why there is none: the model has no MTP head vLLM runs, SGLang refuses or does not model
    ``--speculative-algorithm NEXTN`` for it, or the runtime does not model MTP), in the runtime's own terms."""

    query: str | None
    reason: str | None
    label: str = ""


def profile_lengths(max_len: int | None = None) -> dict[str, int]:
    """The validator's GPU profile (``validator.config.GPU_PROFILE``: working context 32,768, concurrency 4, output
    256) as the speed prediction's lengths, derived as the validator derives them (validator/config.py, the
    vLLM path: ``context = min(working_context, max_model_len)``, ``output_len = min(output_len, context // 2)``,
    ``input_len = context - output_len``): 32,512 in + 256 out at 32,768."""
    from validator.config import GPU_PROFILE

    context = min(GPU_PROFILE["working_context"], max_len or GPU_PROFILE["working_context"])
    out = min(GPU_PROFILE["output_len"], max(1, context // 2))
    return {"max_model_len": context, "prompt_len": context - out, "output_len": out,
            "concurrency": GPU_PROFILE["concurrency"]}


def mtp_profile(plan) -> MtpProfile | None:
    """The recorded profile (method MTP, working context 32,768, concurrency 4) for ``plan``'s model, keeping its
    model, revision, GPU, TP/PP/DP, runtime and release; ``num_speculative_tokens`` is the user's when the page
    already runs MTP, else the MTP layers vLLM builds (``n_predict``'s default, vllm/config/speculative.py:1486-1492).
    The profile is the field guide's vLLM / SGLang benchmark: on llama.cpp and Ollama there is none (None; the page
    shows nothing rather than a disabled link on every page). A model with no MTP head gets the reason instead, in
    the page's runtime's
    terms: vLLM's MTP head (:func:`calculator.engine.mtp.mtp_head`) and ``speculative_config`` on vLLM; on SGLang the
    SGLang plan's own answer to ``--speculative-algorithm NEXTN --speculative-num-steps k`` (SGLang reads the MTP layers
    of config.json, not vLLM's per-architecture draft map; ``k`` is vLLM's layer count when vLLM has a head, else 1)."""
    from calculator.engine.arch import parse_config
    from calculator.engine.errors import EngineInputError
    from calculator.engine.mtp import MtpHead, mtp_head
    from calculator.plan import make_plan
    from calculator.request import InputError, merge_params, parse_request
    from calculator.web.forms import canonical_query

    request = plan.request
    if request.runtime not in ("vllm", "sglang"):
        return None
    sglang = request.runtime == "sglang"
    head = mtp_head(plan.model.config)  # vLLM's MTP draft (SGLang's NEXTN is the SGLang plan's to take or refuse)
    if not isinstance(head, MtpHead) and not sglang:
        return MtpProfile(None, f"no MTP head: {head.reason}")
    spec = request.speculative_config
    if spec is not None and spec.method == "mtp":
        spec_dict = spec.model_dump(exclude_none=True)
    else:
        spec_dict = {"method": "mtp", "num_speculative_tokens": head.layers if isinstance(head, MtpHead) else 1}
    spec_json = json.dumps(spec_dict, separators=(",", ":"))
    try:
        derived = parse_config(plan.model.config).derived_max_model_len
    except EngineInputError:
        derived = None
    lengths = profile_lengths(derived)
    changes = {k: str(v) for k, v in lengths.items()}
    changes["speculative_config"] = spec_json
    if spec is None or spec.method != "mtp":  # the other method's settings do not carry over
        changes.update(acceptance_rate="", acceptance_length="", speculative_eagle_topk="",
                       speculative_num_draft_tokens="")
    params = merge_params(plan.permalink_params(), changes)
    params = {k: v for k, v in params.items() if v != ""}
    try:
        profile = parse_request(params)
        # the runtime must take it (SGLang refuses speculation on hybrid GDN models as not modelled): a memory plan,
        # cached like any other, says so before the link is offered
        make_plan(profile, with_speed=False, with_suggestions=False)
        query = canonical_query(profile.to_params())
    except (InputError, EngineInputError) as e:
        if not sglang:
            return MtpProfile(None, f"the profile does not apply here: {e.field}: {e.message}")
        # SGLang's terms: method mtp is --speculative-algorithm NEXTN, its num_speculative_tokens
        # --speculative-num-steps (calculator/request.py sglang_speculative_config); a refusal of the speculative
        # setting is named by those flags, another field by SGLang's flag for it
        from calculator.verdict import FLAG_NAMES

        head_field = e.field.split(".")[0]
        named = "" if head_field == "speculative_config" else \
            f"{FLAG_NAMES['sglang'].get(e.field, '--' + e.field.replace('_', '-'))}: "
        return MtpProfile(None, "the profile (--speculative-algorithm NEXTN --speculative-num-steps "
                          f"{spec_dict['num_speculative_tokens']}) does not apply here: {named}{e.message}")
    label = (f"MTP profile: {lengths['max_model_len']:,} context ({lengths['prompt_len']:,} in + "
             f"{lengths['output_len']:,} out), {lengths['concurrency']} in flight")
    return MtpProfile(query, None, label)
