"""GET forms of the compat pages (the URL is the permalink)."""
from __future__ import annotations

from django import forms

from . import checks, matrix, releases


def _release_choices():
    return [(r, f"vLLM {r}") for r in reversed(releases.covered_releases())]


class MatrixForm(forms.Form):
    vllm_version = forms.ChoiceField(label="vLLM release", choices=_release_choices, required=False)
    platform = forms.ChoiceField(choices=[(p, p) for p in matrix.PLATFORMS], required=False)
    model = forms.ChoiceField(choices=lambda: [(m, m) for m in matrix.model_choices()], required=False)
    kv_cache_dtype = forms.CharField(label="--kv-cache-dtype", required=False)
    gpu = forms.CharField(label="GPU for the KV-dtype table", required=False)
    block_size = forms.IntegerField(label="--block-size", min_value=1, required=False)

    def params(self) -> dict:
        d = self.cleaned_data
        return {"release": d.get("vllm_version") or checks.DEFAULT_RELEASE, "platform": d.get("platform") or "cuda",
                "model": d.get("model") or matrix.DEFAULT_MODEL, "kv_cache_dtype": d.get("kv_cache_dtype") or "auto",
                "gpu": d.get("gpu") or None, "block_size": d.get("block_size")}


class VerdictForm(forms.Form):
    vllm_version = forms.ChoiceField(label="vLLM release", choices=_release_choices, required=False)
    model = forms.ChoiceField(choices=lambda: [(m, m) for m in matrix.model_choices()])
    gpu = forms.CharField()
    dtype = forms.CharField(required=False)
    kv_cache_dtype = forms.CharField(label="--kv-cache-dtype", required=False)
    block_size = forms.IntegerField(label="--block-size", min_value=1, required=False)
    attention_backend = forms.CharField(label="--attention-backend", required=False)
