"""The calculator's form: a rendering of :class:`~calculator.request.ServingRequest` for the page.

Every field of the request is a form field of the same name (plus the split speculative fields
``speculative_method`` / ``speculative_model`` / ``num_speculative_tokens``, which the permalink writes as
one ``speculative_config`` JSON value). Choices, bounds and help come from the request model; the values
are checked by :func:`~calculator.request.parse_request` alone, so the page, the API and the commands
accept and refuse the same values with the same sentence. What the user typed is kept as typed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, get_args
from urllib.parse import urlencode

from django import forms
from django.http import QueryDict
from pydantic_core import PydanticUndefined

from calculator.engine.gpus import gpus_by_kind
from calculator.engine.schemas import SpecMethod
from calculator.engine.weights import VLLM_QUANTIZATION_METHODS
from calculator.request import (
    ALIASES,
    KNOWN_PARAMS,
    SGLANG_SPEC_FLAGS,
    InputError,
    ServingRequest,
    _kind,
    attention_backends,
    covered_releases,
    default_release,
    gpu_key,
    parse_request,
    repeated_parameter,
)

# The GPU picker's <optgroup>s, one per catalog ``kind`` (:func:`calculator.engine.gpus.gpus_by_kind`).
GPU_GROUP_LABELS = {"datacenter": "Datacenter GPUs", "workstation": "Workstation GPUs",
                    "consumer": "Consumer / gaming GPUs", "apple": "Apple Silicon (unified memory)",
                    "cpu": "CPU only (system RAM)", "custom": "Custom"}
# Speed prediction defaults (``vllm bench serve --dataset-name random``: 1024 in, 128 out, 1 in flight).
SPEED_DEFAULTS = {"prompt_len": 1024, "output_len": 128, "concurrency": 1}
# Characters left readable in permalinks (all legal in a query component, RFC 3986 3.4).
QUERY_SAFE = "/:,"
# Shown as their default when a permalink leaves them out (the permalink omits defaults; the page
# shows the same 1 as the empty form).
SHOWN_DEFAULTS = {"tensor_parallel_size": "1", "pipeline_parallel_size": "1", "gpus_per_node": "8"}
# Where an error about a request field is shown on the page (the form splits speculative_config).
ERROR_SLOT = {"speculative_config": "speculative_method", "speculative_config.model": "speculative_model",
              "ctx_size": "max_model_len"}  # llama.cpp's / Ollama's name of the context (request.runtime_named)
ADVANCED = ("block_size", "max_num_batched_tokens", "max_num_seqs", "enforce_eager", "gpu_memory_gib",
            "kv_cache_memory_bytes")
SGLANG_FIELDS = ("sglang_version", "mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs", "page_size",
                 "dp_size", "ep_size", "enable_dp_attention", "trust_remote_code", "speculative_eagle_topk",
                 "speculative_num_draft_tokens")
HIDDEN_ON_PAGE = ("speculative_config",)
# Fields the form template places by name; every other request field is rendered in the runtime settings
# groups (so a permalink's value is never dropped by the next edit).
PLACED = ("model", "revision", "gpu", "tensor_parallel_size", "pipeline_parallel_size", "gpus_per_node",
          "max_model_len", "concurrency",
          "prompt_len", "output_len", "dtype", "kv_cache_dtype", "quantization", "runtime", "vllm_version",
          "compare_vllm_version", "attention_backend", "gpu_memory_utilization", "speculative_method",
          "speculative_model", "num_speculative_tokens", "acceptance_rate", "block_size", "max_num_batched_tokens",
          "max_num_seqs", "enforce_eager")
LLAMACPP_FIELDS = ("gguf_file", "llamacpp_release", "ollama_release", "parallel", "cache_type_k", "cache_type_v",
                   "flash_attn", "n_gpu_layers", "fit", "fit_target", "kv_unified", "swa_full", "llamacpp_backend",
                   "gguf_file_draft", "n_gpu_layers_draft", "gpus", "split_mode", "tensor_split", "main_gpu")


class FastSelect(forms.Select):
    """``forms.Select`` rendered in Python (same markup as Django's template: ``<option value="x" selected>``):
    the GPU list has ~150 options and the template renderer spent most of a warm page's time on them."""

    def render(self, name, value, attrs=None, renderer=None):
        from django.utils.html import format_html

        from django.utils.html import format_html_join

        final = {"name": name, **self.build_attrs(self.attrs, attrs)}
        chosen = frozenset(str(v) for v in self.format_value(value))
        parts = []
        for value_or_group, label_or_options in self.choices:  # Django's grouped choices: (group, [(v, l), ...])
            if isinstance(label_or_options, (list, tuple)):
                options = _options_html(tuple((str(v), str(lb)) for v, lb in label_or_options), chosen)
                parts.append(format_html('<optgroup label="{}">\n{}\n</optgroup>', value_or_group, options))
            else:
                parts.append(_options_html(((str(value_or_group), str(label_or_options)),), chosen))
        return format_html("<select{}>\n{}\n</select>", _attrs_html(final),
                           format_html_join("\n", "{}", ((p,) for p in parts)))


def _attrs_html(attrs: dict[str, Any]):
    """HTML attributes in the given order (Django's ``flatatt`` sorts them): ``True`` as a bare name,
    ``False``/``None`` left out."""
    from django.utils.html import format_html_join
    from django.utils.safestring import mark_safe

    bare = "".join(f" {k}" for k, v in attrs.items() if v is True)
    pairs = ((k, v) for k, v in attrs.items() if v is not True and v is not False and v is not None)
    return format_html_join("", ' {}="{}"', pairs) + mark_safe(bare)


@lru_cache(maxsize=512)
def _options_html(choices: tuple[tuple[str, str], ...], chosen: frozenset[str]):
    from django.utils.html import format_html_join

    return format_html_join("\n", '<option value="{}"{}>{}</option>',
                            ((v, " selected" if v in chosen else "", label) for v, label in choices))


class FastTextInput(forms.TextInput):
    """``forms.TextInput`` rendered in Python (``<input type="text" name=".." value=".." ...>``)."""

    def render(self, name, value, attrs=None, renderer=None):
        from django.utils.html import format_html

        final = {"type": self.input_type, "name": name}
        value = self.format_value(value)
        if value is not None:
            final["value"] = value
        final.update(self.build_attrs(self.attrs, attrs))
        return format_html("<input{}>", _attrs_html(final))


class CheckboxInput(forms.CheckboxInput):
    """A checkbox that also reads ``0``/``false``/``off``/``no`` from a query string as unchecked."""

    def value_from_datadict(self, data, files, name):
        value = data.get(name)
        if isinstance(value, str) and value.strip().lower() in ("", "0", "false", "off", "no"):
            return False
        return super().value_from_datadict(data, files, name)


def _literal_choices(name: str) -> list[str]:
    annotation = ServingRequest.model_fields[name].annotation
    for arg in (annotation, *get_args(annotation)):
        values = get_args(arg)
        if values and all(isinstance(v, str) for v in values):
            return list(values)
    return []


def _all_backends() -> list[str]:
    """The default release's backends (each release's own list is checked by the request model)."""
    return list(attention_backends(default_release()))


def _field(name: str) -> forms.Field:
    """The form field for a request field: a text, select or checkbox input with the request's help and
    HTML hints (min/max from the request's bounds). No Django validation: :func:`parse_request` decides."""
    info = ServingRequest.model_fields[name]
    meta = info.json_schema_extra or {}
    help_text = meta.get("help", "")
    if _kind(name) is bool:
        return forms.BooleanField(required=False, widget=CheckboxInput, help_text=help_text)
    choices: list[tuple[str, str]] | None = None
    if name == "gpu":
        choices = [(GPU_GROUP_LABELS.get(kind, kind), [(gpu_key(g), f"{g.name} ({g.memory_gib:g} GiB)") for g in gpus])
                   for kind, gpus in gpus_by_kind().items()]
    elif name == "vllm_version":
        choices = [("", "vLLM: default (0.32.0)"), *((v, f"vLLM {v}") for v in reversed(covered_releases()))]
    elif name == "compare_vllm_version":
        choices = [("", "no comparison"), *((v, f"compare with vLLM {v}") for v in reversed(covered_releases()))]
    elif name == "sglang_version":
        from calculator.runtimes.sglang.releases import COVERED, DEFAULT

        choices = [("", f"SGLang: default ({DEFAULT})"), *((v, f"SGLang {v}") for v in reversed(COVERED))]
    elif name == "runtime":
        choices = [("vllm", "vLLM"), ("sglang", "SGLang"), ("llama.cpp", "llama.cpp"), ("ollama", "Ollama")]
    elif name == "attention_backend":
        choices = [("", "auto (vLLM picks)"), *((b, b) for b in _all_backends())]
    elif name in ("workload",):
        choices = [("", "not set"), *((v, v) for v in _literal_choices(name))]
    elif _literal_choices(name):
        choices = [(v, v) for v in _literal_choices(name)]
        if info.default is None:  # an optional setting: the blank choice is "the runtime's default"
            choices = [("", "default"), *choices]
    if choices is not None:
        return forms.CharField(required=False, widget=FastSelect(choices=choices), help_text=help_text,
                               initial=info.default if isinstance(info.default, str) else None)
    attrs: dict[str, Any] = {}
    for c in info.metadata:
        for attr, html in (("ge", "min"), ("gt", "min"), ("le", "max")):
            if getattr(c, attr, None) is not None:
                attrs[html] = getattr(c, attr)
    if meta.get("tokens") or attrs:
        attrs["inputmode"] = "decimal" if "float" in str(info.annotation) else "numeric"
    default = info.default if info.default not in (None, "auto") and info.default is not PydanticUndefined else None
    return forms.CharField(required=False, widget=FastTextInput(attrs=attrs), help_text=help_text,
                           initial=default)


class EstimateForm(forms.Form):
    """Every request field, named as the flags; field order is the permalink's order. Bind with
    :meth:`from_query`; after ``is_valid()``, ``form.request`` is the :class:`ServingRequest`."""

    quantization_suggestions = VLLM_QUANTIZATION_METHODS
    ADVANCED = ADVANCED

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.request: ServingRequest | None = None
        self.input_error: InputError | None = None
        self.repeated: InputError | None = None  # a parameter the query gave twice (see from_query)
        # what the query gave that the answer leaves out, each with the sentence the API refuses it with
        self.not_applied: list[NotApplied] = []

    @classmethod
    def from_query(cls, query: QueryDict | dict[str, Any]) -> EstimateForm:
        """Bind a query string. ``speculative_config`` (the permalink's JSON) fills the split speculative
        fields so they show on the page; a value that is not such JSON stays and is reported."""
        data = {k: query.get(k) for k in query}
        repeated = repeated_parameter(query)
        for alias, target in ALIASES.items():  # tp_size=4 fills the tensor_parallel_size field (not its shown default)
            if (data.get(alias) or "").strip() and not (data.get(target) or "").strip():
                data[target] = data.pop(alias)
        # the runtime menu switched from a permalink: the settings only the runtime it left takes (its release
        # selector, which every permalink names, and the others the form still holds) are dropped instead of
        # refusing the switch; the API refuses them
        from calculator.request import RUNTIME_ONLY

        runtime = (data.get("runtime") or "vllm").strip()
        family = {"vllm": "vllm", "sglang": "sglang", "llama.cpp": "llama.cpp", "ollama": "llama.cpp"}.get(runtime)
        dropped: dict[str, Any] = {}
        if family is not None:
            for owner, fields in RUNTIME_ONLY.items():
                if family not in owner.split("/"):
                    for name in fields:
                        if name in data:
                            dropped[name] = data.pop(name)
            if runtime == "llama.cpp":  # Ollama's release belongs to llama.cpp's family but not to llama.cpp
                if "ollama_release" in data:
                    dropped["ollama_release"] = data.pop("ollama_release")
            if runtime != "sglang":  # SGLang's speculative flags (the API refuses them too, naming vLLM's)
                for name in SGLANG_SPEC_FLAGS:
                    if name in data:
                        dropped[name] = data.pop(name)
        for name in list(data):  # a parameter no surface takes: the API refuses it naming the nearest one
            if name not in KNOWN_PARAMS and name not in ALIASES:
                dropped[name] = data.pop(name)
        for name, value in SHOWN_DEFAULTS.items():
            if not (data.get(name) or "").strip():
                data[name] = value
        raw = (data.get("speculative_config") or "").strip()
        if raw and not any(data.get(k) for k in ("speculative_method", "speculative_model", "num_speculative_tokens")):
            try:
                spec = json.loads(raw)
            except (ValueError, RecursionError):
                spec = None
            if isinstance(spec, dict) and set(spec) <= {"method", "model", "num_speculative_tokens"}:
                data.pop("speculative_config")
                data["speculative_method"] = str(spec.get("method") or "")
                data["speculative_model"] = str(spec.get("model") or "")
                data["num_speculative_tokens"] = str(spec.get("num_speculative_tokens") or "")
        form = cls(data)
        form.repeated = repeated
        form.not_applied = not_applied(dropped, runtime)
        return form

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        raw = {k: v for k, v in self.data.items() if k in KNOWN_PARAMS or k in ALIASES}
        try:
            if self.repeated is not None:
                raise self.repeated
            self.request = parse_request(raw)
        except InputError as exc:
            self.show_error(exc)
        return data

    def show_error(self, exc: InputError) -> None:
        """Put an input error beside the field it names (the form's errors when no field shows it)."""
        self.input_error = exc
        slot = ERROR_SLOT.get(exc.field, exc.field)
        self.add_error(slot if slot in self.fields else None, exc.message)

    @property
    def error_slots(self) -> list[tuple[str, list[str]]]:
        """``[(field name, [messages])]`` for every field, in order, plus ``("form", non-field errors)``:
        the out-of-band error containers an htmx response refreshes (empty lists clear old messages)."""
        errors = self.errors if self.is_bound else {}
        slots = [(name, list(errors.get(name, ()))) for name in self.fields]
        return [*slots, ("form", list(errors.get("__all__", ())))]

    @property
    def error_summary(self) -> list[tuple[str | None, str, list[str]]]:
        """``[(field name or None for the form, value as given, [messages])]`` for each error, in the order of
        ``form.errors``: the summary above the results names each bad field with what the user typed (cut after
        :data:`MAX_SHOWN_VALUE` characters, control characters escaped; ``""`` when the field was left empty or for
        the form's own errors)."""
        out = []
        for name, errors in (self.errors if self.is_bound else {}).items():
            if name == "__all__":
                out.append((None, "", list(errors)))
                continue
            # a control character is shown escaped (a NUL byte reads \x00, not as nothing)
            text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(self.data.get(name) or "").strip())
            out.append((name, text if len(text) <= MAX_SHOWN_VALUE else text[:MAX_SHOWN_VALUE] + "…", list(errors)))
        return out

    @property
    def advanced_open(self) -> bool:
        """Open the "Advanced" group when one of its fields is set or has an error."""
        return self._any_set(ADVANCED)

    def _any_set(self, names) -> bool:
        data = self.data if self.is_bound else self.initial
        return any(data.get(n) not in (None, "", False, "0", "false") for n in names) or any(
            n in self.errors for n in names)

    def groups(self) -> list[dict]:
        """The runtime settings groups below the main fields: vLLM's other settings, SGLang's and llama.cpp's,
        each ``{"legend", "fields", "open", "runtimes"}``; every request field the template does not place is in
        one. ``runtimes`` is the runtime menu's values the group's settings belong to (space-separated; empty for
        the group every runtime reads): the page's script shows only the chosen runtime's group when the menu
        changes (``data-runtimes`` in ``calculator/_form.html``, read by ``static/js/calculator.js``)."""
        groups = []
        rest = [n for n in self.fields if n not in PLACED and n not in SGLANG_FIELDS and n not in LLAMACPP_FIELDS]
        runtime = (self.data.get("runtime") or "vllm").strip().lower()
        for legend, names, owner in (("More vLLM and workload settings", rest, None),
                                     ("SGLang settings (runtime=sglang)", SGLANG_FIELDS, ("sglang",)),
                                     ("llama.cpp / Ollama settings (runtime=llama.cpp or ollama)", LLAMACPP_FIELDS,
                                      ("llama.cpp", "ollama"))):
            names = [n for n in names if n in self.fields]
            # the chosen runtime's own settings are open: they are the ones its answer reads
            groups.append({"legend": legend, "fields": [self[n] for n in names],
                           "open": self._any_set(names) or (owner is not None and runtime in owner),
                           "runtimes": " ".join(owner or ())})
        return groups

    def canonical_query(self, sha: str | None = None) -> str:
        """The permalink's query string of the valid request (:meth:`ServingRequest.to_params`), with the
        resolved commit ``sha`` as ``revision`` when the metadata layer gave one."""
        params = self.request.to_params()
        if sha:
            params = {"model": params.pop("model"), "revision": sha,
                      **{k: v for k, v in params.items() if k != "revision"}}
        return canonical_query(params)

    def error_list(self) -> list[tuple[str | None, str]]:
        """``[(field or None, message), ...]`` in field order, for the JSON API."""
        return [(None if name == "__all__" else name, m) for name, errors in self.errors.items() for m in errors]


MAX_SHOWN_VALUE = 200  # characters of a value shown back in a "not applied" message


@dataclass(frozen=True)
class NotApplied:
    """A parameter of the query the page's answer leaves out: ``param=value`` and the API's refusal of it (the
    ``error`` of ``/api/estimate``'s 400 body, ``field: sentence``)."""

    param: str
    value: str
    error: str

    @property
    def text(self) -> str:
        return f"Not applied: {self.param}={self.value} ({self.error})"


def _picker_default(name: str) -> str | None:
    """The release a runtime's release picker shows untouched (the form submits every picker, whichever runtime is
    picked: an untouched one of another runtime is dropped without a word; another release is said)."""
    if name == "vllm_version":
        return default_release()
    if name == "sglang_version":
        from calculator.runtimes.sglang.releases import DEFAULT

        return DEFAULT
    if name == "llamacpp_release":
        from calculator.runtimes.llamacpp.memory import RELEASES

        return RELEASES[0]
    if name == "ollama_release":
        from calculator.runtimes.llamacpp.ollama import DEFAULT_OLLAMA_RELEASE

        return DEFAULT_OLLAMA_RELEASE
    return None


def not_applied(dropped: dict[str, Any], runtime: str) -> list[NotApplied]:
    """The dropped parameters the API would refuse, each with the API's sentence for it (found by asking
    :func:`parse_request` about that parameter alone with the query's runtime). A value the API accepts as the
    default (``data_parallel_size=1`` with SGLang, which the form submits) and an untouched release picker of another
    runtime (:func:`_picker_default`) are dropped without a word."""
    out = []
    for name, value in dropped.items():
        text = "" if value is None else str(value)
        if not text.strip() or text.strip() == _picker_default(name):
            continue
        try:
            parse_request({"model": "org/name", "runtime": runtime, name: text})
        except InputError as exc:
            shown = text if len(text) <= MAX_SHOWN_VALUE else text[:MAX_SHOWN_VALUE] + "…"
            out.append(NotApplied(str(name)[:60], shown, f"{exc.field}: {exc.message}"))
    return out


def _build_fields() -> None:
    fields = EstimateForm.base_fields
    for name in ServingRequest.model_fields:
        if name in HIDDEN_ON_PAGE:
            for split in ("speculative_method", "speculative_model", "num_speculative_tokens"):
                fields[split] = _split_field(split)
            continue
        fields[name] = _field(name)
    fields["model"].widget.attrs.update(list="catalog-models", placeholder="org/name", autocomplete="off")
    fields["quantization"].widget.attrs.update(list="quantization-methods", placeholder="from the checkpoint")
    fields["revision"].widget.attrs["placeholder"] = "main"
    for name in ("max_model_len", "gpu_memory_utilization", "block_size", "max_num_batched_tokens", "max_num_seqs"):
        fields[name].widget.attrs["placeholder"] = "release default"
    for name, default in SPEED_DEFAULTS.items():
        fields[name].widget.attrs["placeholder"] = str(default)
    fields["acceptance_rate"].widget.attrs["placeholder"] = "e.g. 0.7"
    fields["vllm_version"].initial = None
    # parse_request decides: Django's own "Null characters are not allowed." beside its refusal of the same value
    # ("the value contains a NUL character") would be a second message for one problem
    from django.core.validators import ProhibitNullCharactersValidator

    for field in fields.values():
        field.validators = [v for v in field.validators if not isinstance(v, ProhibitNullCharactersValidator)]


def _split_field(name: str) -> forms.Field:
    if name == "speculative_method":
        from calculator.engine.mtp import MTP_METHOD_NAMES

        # vLLM's per-architecture MTP names run as mtp and are kept in the command (engine/schemas.py MtpNameMixin)
        return forms.CharField(required=False, help_text="speculative decoding method (SGLang's --speculative-algorithm: eagle3 = EAGLE3, eagle = EAGLE with a draft, mtp = NEXTN, draft_model = STANDALONE, ngram = NGRAM)", widget=FastSelect(
            choices=[("", "off"), *((m, m) for m in get_args(SpecMethod)),
                     ("mtp, by vLLM's per-architecture name", [(m, m) for m in MTP_METHOD_NAMES])]))
    if name == "speculative_model":
        return forms.CharField(required=False, help_text="draft model (draft_model, eagle, eagle3; SGLang: --speculative-draft-model-path)",
                               widget=FastTextInput(attrs={"placeholder": "draft model org/name"}))
    return forms.CharField(required=False, help_text="tokens drafted per step (SGLang: --speculative-num-steps)",
                           widget=FastTextInput(attrs={"placeholder": "e.g. 3", "inputmode": "numeric",
                                                         "min": 1, "max": 16}))


_build_fields()


def canonical_query(params: dict[str, str]) -> str:
    """A permalink's query string from :meth:`ServingRequest.to_params` (or a plan's permalink params)."""
    return urlencode(list(params.items()), safe=QUERY_SAFE)


def tidy_query(query: QueryDict) -> str:
    """What the user typed, minus empty values and the values a field shows by default (``dtype=auto``,
    ``pipeline_parallel_size=1`` ...: the form submits them whether or not they were touched), in field order:
    the URL pushed while the form has errors (so nothing they submitted is lost)."""
    from calculator.request import ServingRequest

    def default(name: str) -> str | None:
        if name in ("model", "gpu", "vllm_version", "sglang_version", "llamacpp_release", "ollama_release"):
            return None  # always written, as the permalink writes them
        if name in SHOWN_DEFAULTS:
            return SHOWN_DEFAULTS[name]
        info = ServingRequest.model_fields.get(name)
        if info is None or info.default is None:
            return None
        return "true" if info.default is True else "false" if info.default is False else str(info.default)

    names = [*EstimateForm.base_fields, "speculative_config"]
    return urlencode([(n, query[n]) for n in names if query.get(n, "").strip() and query[n].strip() != default(n)],
                     safe=QUERY_SAFE)
