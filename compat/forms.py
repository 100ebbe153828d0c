"""GET forms of the compat pages (the URL is the permalink).

The model and GPU pickers are the calculator's: the model is a text box with the catalog's models as
suggestions, the GPU is the calculator's select (catalog devices by their permalink key, ``H100``), and both
start from the calculator's state when the link from its results carries it (``?model=...&gpu=...``). A
value the picker does not list (a typo in a hand-written URL) is kept and shown selected, so the error
beside it names what was asked.
"""
from __future__ import annotations

import re
from functools import lru_cache

from django import forms

from calculator.web.forms import FastSelect, FastTextInput

from . import checks, matrix, releases


@lru_cache(maxsize=1)
def _release_choices():
    return [("", f"vLLM {checks.DEFAULT_RELEASE} (default)"),
            *((r, f"vLLM {r}") for r in reversed(releases.covered_releases()))]


def _backend_choices() -> list[tuple[str, str]]:
    """The calculator's ``--attention-backend`` picker (auto, then the default release's backends)."""
    from calculator.web.forms import EstimateForm

    return list(EstimateForm.base_fields["attention_backend"].widget.choices)


def _gpu_choices() -> list:
    """The calculator's GPU picker (``calculator.web.forms``): ``<optgroup>``s of ``(key, "name (memory GiB)")``."""
    from calculator.web.forms import EstimateForm

    return list(EstimateForm.base_fields["gpu"].widget.choices)


def _keys(choices) -> set[str]:
    """Every option value of (possibly grouped) choices."""
    return {str(v) for k, v_or_group in choices for v in (
        [o[0] for o in v_or_group] if isinstance(v_or_group, (list, tuple)) else [k])}


@lru_cache(maxsize=1)
def _kv_choices() -> list[tuple[str, str]]:
    """Every ``--kv-cache-dtype`` value of the covered releases (newest release's order first)."""
    values: dict[str, None] = {}
    for release in reversed(releases.covered_releases()):
        values.update(dict.fromkeys(checks.load_release(release)["cache_dtypes"]["values"]))
    return [(v, v) for v in values]


def _clean_release(value: str | None) -> str:
    """A vLLM release as typed -> the release whose data answers it (a patch of a covered minor takes that
    minor's data, as the calculator does: :func:`calculator.request.compat_release`); a release without
    data is refused with the covered list and the reason, not Django's generic "not one of the choices"."""
    from calculator.request import compat_release

    value = (value or "").strip()
    if not value:
        return ""
    if not re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?", value):  # 0.10.1.1 has four parts
        raise forms.ValidationError(f"{value!r} is not a vLLM release (X.Y.Z, e.g. {checks.DEFAULT_RELEASE})")
    answered = compat_release(value)
    if answered is None:
        raise forms.ValidationError(
            releases.not_covered_message(value) + ": compatibility data is extracted from each release's own "
            "wheel")
    return answered


class _Pickers(forms.Form):
    """Shared fields: the model (text with suggestions) and the GPU (select), as on the calculator."""

    def __init__(self, data=None, *args, **kwargs):
        super().__init__(data, *args, **kwargs)
        self.fields["model"].widget.attrs.update(list="compat-models", placeholder="org/name", autocomplete="off")
        gpu = self.fields["gpu"]
        choices = [("", "newest GPU of the platform")] if not gpu.required else []
        choices += _gpu_choices()
        asked = (data or {}).get("gpu") if data is not None else None
        if asked and asked not in _keys(choices):
            choices.append((asked, f"{asked} (not in the catalog)"))
        gpu.widget = FastSelect(choices=choices)
        if "vllm_version" in self.fields:  # a release typed into the URL stays shown, so its error reads right
            release_choices = list(_release_choices())
            asked = (data or {}).get("vllm_version") if data is not None else None
            if asked and asked not in {k for k, _ in release_choices}:
                release_choices.append((asked, f"vLLM {asked}"))
            self.fields["vllm_version"].widget = FastSelect(choices=release_choices)
        for field in self.fields.values():  # Python-rendered widgets: the GPU list is ~150 options
            if type(field.widget) is forms.Select:
                field.widget = FastSelect(choices=field.widget.choices, attrs=field.widget.attrs)
            elif type(field.widget) in (forms.TextInput, forms.NumberInput):
                field.widget = FastTextInput(attrs=field.widget.attrs)

    def clean_vllm_version(self) -> str:
        return _clean_release(self.cleaned_data.get("vllm_version"))

    def clean_model(self) -> str:
        value = (self.cleaned_data.get("model") or "").strip()
        if not value:
            return value
        known = {m.lower(): m for m in matrix.model_choices()}
        if value.lower() not in known:
            raise forms.ValidationError(f"{value!r} is not in the offline catalog: the compatibility pages read the "
                                        "shipped configs (pick one of the suggestions)")
        return known[value.lower()]


class MatrixForm(_Pickers):
    model = forms.CharField(required=False, initial=matrix.DEFAULT_MODEL)
    gpu = forms.CharField(label="GPU for the KV-dtype table", required=False)
    vllm_version = forms.CharField(label="vLLM release", required=False, widget=FastSelect())
    platform = forms.ChoiceField(choices=[(p, p) for p in matrix.PLATFORMS], required=False)
    kv_cache_dtype = forms.ChoiceField(label="--kv-cache-dtype", choices=_kv_choices, required=False)
    block_size = forms.IntegerField(label="--block-size", min_value=1, required=False)

    @classmethod
    def from_query(cls, query) -> MatrixForm:
        """Bind the query with the defaults the matrix uses filled in, so the pickers show what the page
        describes (an empty query shows the default model, not the first in the list)."""
        data = {k: query.get(k) for k in query}
        defaults = {"model": matrix.DEFAULT_MODEL, "platform": "cuda", "kv_cache_dtype": "auto",
                    "vllm_version": checks.DEFAULT_RELEASE}
        for k, v in defaults.items():
            if not (data.get(k) or "").strip():
                data[k] = v
        return cls(data)

    def params(self) -> dict:
        d = self.cleaned_data
        return {"release": d.get("vllm_version") or checks.DEFAULT_RELEASE, "platform": d.get("platform") or "cuda",
                "model": d.get("model") or matrix.DEFAULT_MODEL, "kv_cache_dtype": d.get("kv_cache_dtype") or "auto",
                "gpu": d.get("gpu") or None, "block_size": d.get("block_size")}


class VerdictForm(_Pickers):
    model = forms.CharField()
    gpu = forms.CharField()
    vllm_version = forms.CharField(label="vLLM release", required=False, widget=FastSelect())
    dtype = forms.CharField(required=False)
    kv_cache_dtype = forms.ChoiceField(label="--kv-cache-dtype", choices=_kv_choices, required=False)
    block_size = forms.IntegerField(label="--block-size", min_value=1, required=False)
    attention_backend = forms.CharField(label="--attention-backend", required=False,
                                        widget=FastSelect(choices=_backend_choices))
