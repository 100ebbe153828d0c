"""The validation request: the calculator's query parameters (same names as its permalink)."""
from __future__ import annotations

from typing import Any

from django import forms


class ValidationRequestForm(forms.Form):
    """The calculator's parameters that matter to a run. Values are checked again, with the model
    resolved, by ``validator.config.build_configuration`` (which raises ``ConfigurationError``)."""

    model = forms.CharField(max_length=200)
    revision = forms.CharField(required=False, max_length=128)
    gpu = forms.CharField(required=False, max_length=100)
    tensor_parallel_size = forms.IntegerField(required=False, min_value=1, max_value=1024)
    pipeline_parallel_size = forms.IntegerField(required=False, min_value=1, max_value=1024)
    max_model_len = forms.IntegerField(required=False, min_value=16, max_value=10_000_000)
    concurrency = forms.IntegerField(required=False, min_value=1, max_value=4096)
    max_num_seqs = forms.IntegerField(required=False, min_value=1, max_value=100_000)
    max_num_batched_tokens = forms.IntegerField(required=False, min_value=1, max_value=10_000_000)
    block_size = forms.IntegerField(required=False, min_value=1, max_value=4096)
    dtype = forms.ChoiceField(required=False, choices=[(c, c) for c in ("", "auto", "bfloat16", "float16", "float32")])
    kv_cache_dtype = forms.ChoiceField(required=False, choices=[(c, c) for c in (
        "", "auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")])
    quantization = forms.CharField(required=False, max_length=40)
    attention_backend = forms.CharField(required=False, max_length=60)
    gpu_memory_utilization = forms.FloatField(required=False, min_value=0.01, max_value=1.0)
    enforce_eager = forms.BooleanField(required=False)
    speculative_config = forms.CharField(required=False, max_length=2000)
    speculative_method = forms.CharField(required=False, max_length=40)
    speculative_model = forms.CharField(required=False, max_length=200)
    num_speculative_tokens = forms.IntegerField(required=False, min_value=1, max_value=64)

    def params(self) -> dict[str, Any]:
        """Cleaned values that were given (empty ones dropped)."""
        return {k: v for k, v in self.cleaned_data.items() if v not in (None, "", False)}
