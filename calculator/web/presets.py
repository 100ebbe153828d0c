"""Examples a serving engineer recognises: each is a permalink of the calculator (a first answer without
typing). Every model is in the offline catalog (``calculator/data/model_configs``), so the examples answer
without the Hub. The landing page shows the first one.

The MTP example is the speculative-decoding field guide's benchmark profile ("method = MTP,
working_context = 32768, concurrency = 4", /work/shared/reference/field_guide_000_*.txt) on DeepSeek-V3,
whose config has one MTP layer (``num_nextn_predict_layers: 1``), hence ``num_speculative_tokens`` 1.
"""

from __future__ import annotations

from dataclasses import dataclass
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
           "the field guide's benchmark profile: method mtp, max_model_len 32768, concurrency 4",
           (("model", "deepseek-ai/DeepSeek-V3"), ("gpu", "H200"), ("tensor_parallel_size", "8"),
            ("max_model_len", "32768"), ("concurrency", "4"),
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
