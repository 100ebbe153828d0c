"""What ``--kv-cache-dtype auto`` stores the KV cache in, per SGLang release, for a quantized checkpoint.

SGLang resolves ``auto`` in the model runner, after loading (``kv_auto``: ``model_executor/model_runner.py`` up to
0.5.10.post1, ``mem_cache/kv_cache_dtype.py`` in 0.5.23)::

    quant_config = getattr(self.model, "quant_config", None)
    kv_cache_quant_algo = getattr(quant_config, "kv_cache_quant_algo", None)
    if isinstance(kv_cache_quant_algo, str) and kv_cache_quant_algo.upper() == "FP8":
        kv_cache_dtype = float8_e4m3fn          # float8_e4m3fnuz on ROCm; one byte either way
    else:
        kv_cache_dtype = model dtype

So the checkpoint's KV scheme counts only through the ``kv_cache_quant_algo`` attribute of the quantization class the
release loads it with, held by a model class that keeps ``self.quant_config``. Each step differs per release (every
line cited from the release's wheel in :mod:`.releases`, keys ``q_*``, ``mo_*``, ``ct_*``, ``fp8_kv_attr``):

- 0.4.3.post4 and 0.4.10.post2: ``auto`` is always the model dtype (the runner reads no quantization config).
- which class: ``ModelConfig._parse_quant_hf_config`` takes ``config.json``'s ``quantization_config``, else
  ``compression_config``, else ``hf_quant_config.json``, whose ``quant_algo`` names the method (0.4.10.post2 and 0.5.3:
  always ``modelopt``, i.e. ``ModelOptFp8Config``; from 0.5.3.post1 ``modelopt_fp4`` for NVFP4, ``modelopt_fp8``
  for FP8); ``config.json``'s own ModelOpt block is renamed the same way from 0.5.9 (without ``quant_method``) /
  0.5.10.post1 (``quant_method: modelopt`` too); ``--quantization modelopt`` picks by ``quant_algo`` from 0.5.7;
  0.5.3.post1 registers no ``modelopt`` at all.
- which attribute: ``ModelOptFp8Config`` stores the KV algorithm as ``kv_cache_quant_method`` up to 0.5.3.post1 (so
  ``auto`` stays the model dtype for ModelOpt FP8 checkpoints there), ``ModelOptQuantConfig.kv_cache_quant_algo``
  from 0.5.7; in ``config.json``'s flat format it reads only ``kv_cache_scheme`` (0.5.23: else
  ``kv_cache_quant_algo``); ``ModelOptFp4Config`` reads ``kv_cache_quant_algo`` then ``kv_cache_scheme`` (0.5.3 to
  0.5.8.post1), ``kv_cache_scheme`` only (0.5.9, 0.5.10.post1), ``kv_cache_scheme`` then ``kv_cache_quant_algo``
  (0.5.23); in ``hf_quant_config.json``'s nested format both read ``quantization.kv_cache_quant_algo``;
  ``CompressedTensorsConfig`` has the attribute only from 0.5.23 (FP8 for a static symmetric per-tensor float8
  ``kv_cache_scheme``), ``Fp8Config`` from 0.5.23 (its config's ``kv_cache_quant_algo``).
- which model: the ``EntryClass`` must set ``self.quant_config`` (``data/quant_config_holders.json``, read from each
  wheel by ``data/extract_quant_config_holders.py``): Qwen3.5 in 0.5.9 does not, so its checkpoints' FP8 KV is
  ignored there.

vLLM differs (:func:`calculator.engine.memory.checkpoint_kv_cache_dtype`): from 0.14 it reads ``kv_cache_scheme`` or
``kv_cache_quant_algo`` of any ModelOpt checkpoint, whichever format; SGLang's rule above is not that one, and where a
release ignores the checkpoint's KV scheme the plan says the KV cache stays in the model dtype.

DeepSeek DSA models (V3.2, GLM-5) have ServerArgs set the KV dtype before this (``memory.plan``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from calculator.engine.errors import EngineInputError

from .releases import at_least, cite

_DATA = Path(__file__).resolve().parent / "data" / "quant_config_holders.json"
_MODELOPT_NAMES = {  # the ModelOpt names each release registers in QUANTIZATION_METHODS (q_alias_fp8 and the next lines)
    "0.4.10.post2": ("modelopt", "modelopt_fp4"), "0.5.3": ("modelopt", "modelopt_fp4"),
    "0.5.3.post1": ("modelopt_fp8", "modelopt_fp4"),
}
_COMPAT_OLD = {"modelopt_fp4": ("modelopt",), "petit_nvfp4": ("modelopt",),
               "w8a8_int8": ("compressed-tensors", "compressed_tensors"),
               "w8a8_fp8": ("compressed-tensors", "compressed_tensors")}
# what ModelOptFp4Config makes of a string kv_cache_scheme (0.5.7 on)
_FP4_STR_SCHEME = {"FP8": "FP8", "FLOAT8": "FP8", "FP4": "NVFP4", "FLOAT4": "NVFP4", "NVFP4": "NVFP4"}
# 0.5.23 canonicalize_modelopt_quant_algo (sglang/srt/layers/modelopt_utils.py:23-30)
_ALGO_0523 = {"FP8": "modelopt_fp8", "MXFP8": "mxfp8", "FP4": "modelopt_fp4", "NVFP4": "modelopt_fp4",
              "NVFP4_AWQ": "modelopt_fp4", "W4A16_NVFP4": "modelopt_fp4"}


@dataclass(frozen=True)
class CheckpointKV:
    """What ``auto`` resolves to for one checkpoint on one release.

    ``kv_cache_dtype``: ``"fp8_e4m3"`` when ``auto`` takes the checkpoint's FP8 KV scheme, ``None`` when it stays the
    model dtype. ``source``: why, with the release's file:line. ``quant_method``: the SGLang quantization method the
    release loads the checkpoint with (``None``: unquantized). ``declared``: where the checkpoint declares an FP8 KV
    cache, if it does. ``note``: said to the user (a declared FP8 KV cache this release ignores, or a start that
    depends on ``--quantization``). ``refusal``: why SGLang fails at start-up while reading the checkpoint's
    quantization config (``kv_cache_dtype`` is then ``None``); ``fix``: the ``--quantization`` value that loads it,
    when one does."""
    kv_cache_dtype: str | None
    source: str
    quant_method: str | None = None
    declared: str | None = None
    note: str | None = None
    refusal: str | None = None
    fix: str | None = None  # the --quantization that loads the checkpoint when ``refusal`` says it does not


@cache
def _holders(release: str) -> dict[str, list[str]]:
    return json.loads(_DATA.read_text())["releases"][release]


def quant_config_holder(release: str, arch: str) -> tuple[str, str]:
    """``(status, where)``: whether SGLang ``release``'s model class ``arch`` keeps ``self.quant_config`` (``holds``,
    ``none``, ``other``, ``unknown``; ``missing`` for a class the release does not register)."""
    got = _holders(release).get(arch)
    return (got[0], got[1]) if got else ("missing", f"{arch} is not a model class of SGLang {release}")


def _fp8_declared(d: dict[str, Any] | None) -> str | None:
    """How a flat quantization block declares an FP8 KV cache (``kv_cache_quant_algo`` FP8, a float 8-bit
    ``kv_cache_scheme``), else ``None``."""
    if not isinstance(d, dict):
        return None
    algo, scheme = d.get("kv_cache_quant_algo"), d.get("kv_cache_scheme")
    if isinstance(algo, str) and algo.upper() == "FP8":
        return f"kv_cache_quant_algo {algo!r}"
    if isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8:
        return f"kv_cache_scheme {json.dumps(scheme, sort_keys=True)}"
    if isinstance(scheme, str) and scheme.strip().upper() in ("FP8", "FLOAT8"):
        return f"kv_cache_scheme {scheme!r}"
    return None


def _declarations(hf_config: dict, top, text_qc, comp, hqc) -> str | None:
    found = []
    for where, d in (("config.json quantization_config", top), ("text_config.quantization_config", text_qc),
                     ("config.json compression_config", comp),
                     ("hf_quant_config.json quantization", (hqc or {}).get("quantization"))):
        got = _fp8_declared(d)
        if got:
            found.append(f"{got} in {where}")
    return "; ".join(found) or None


def _parse_modelopt(release: str, q: dict[str, Any]) -> str | None:
    """The quant_method SGLang makes of a ModelOpt ``quantization`` block (``q_file``)."""
    algo = q.get("quant_algo")
    if release in ("0.4.10.post2", "0.5.3"):
        return "w4afp8" if algo == "MIXED_PRECISION" else "modelopt"
    if algo == "MIXED_PRECISION":
        return "modelopt_mixed_or_w4afp8"
    if at_least(release, "0.5.23"):
        return _ALGO_0523.get(algo) if isinstance(algo, str) else None
    if isinstance(algo, str) and ("FP4" in algo or "NVFP4" in algo):
        return "modelopt_fp4"
    if isinstance(algo, str) and "FP8" in algo:
        return "modelopt_fp8"
    return "modelopt_fp8" if release == "0.5.3.post1" else None  # 0.5.3.post1: "Default to FP8"


def _not_modelled(what: str) -> EngineInputError:
    return EngineInputError("quant_config", f"not modelled: {what}; pass --kv-cache-dtype explicitly (bfloat16 or "
                            "fp8_e4m3) to size the KV cache without it")


def checkpoint_kv(release: str, hf_config: dict[str, Any], quant_config: dict[str, Any] | None,
                  quantization: str | None, *, is_hip: bool, model_dtype: str) -> CheckpointKV:
    """What ``--kv-cache-dtype auto`` stores the KV cache in on SGLang ``release`` (module docstring).

    ``hf_config``: config.json; ``quant_config``: the checkpoint's separate quantization file (read as
    ``hf_quant_config.json`` when it has a nested ``quantization`` block); ``quantization``: ``--quantization``.

    Raises:
        EngineInputError(``quant_config``): a checkpoint declaring an FP8 KV cache through a path this does not follow
        (ModelOpt on ROCm, MIXED_PRECISION / MXFP8 / online-requantized configs, a quantization config only in
        ``text_config``, a model class that forwards its attributes).
    """
    top = hf_config.get("quantization_config") if isinstance(hf_config.get("quantization_config"), dict) else None
    text = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else {}
    text_qc = text.get("quantization_config") if isinstance(text.get("quantization_config"), dict) else None
    comp = hf_config.get("compression_config") if isinstance(hf_config.get("compression_config"), dict) else None
    hqc = quant_config if isinstance(quant_config, dict) and isinstance(quant_config.get("quantization"), dict) \
        else None
    declared = _declarations(hf_config, top, text_qc, comp, hqc)
    flag = (quantization or "").strip().lower() or None
    flag = None if flag in ("none", "auto") else flag
    model_kv = f"auto -> the model dtype {model_dtype}"
    arch = (hf_config.get("architectures") or [""])[0]

    def ignored(why: str) -> str | None:
        return (f"the checkpoint declares an FP8 KV cache ({declared}), which SGLang {release} does not use: {why}; "
                f"the KV cache stays in {model_dtype} (pass --kv-cache-dtype fp8_e4m3 for an FP8 cache)"
                if declared else None)

    if not at_least(release, "0.5.3"):
        why = f"--kv-cache-dtype auto is the model dtype whatever the checkpoint declares ({cite(release, 'kv_auto')})"
        refusal = method = fix = None
        if release != "0.4.3.post4":
            # the KV cache ignores the quantization config here, but reading it can still stop SGLang at start-up
            try:
                got = _resolve(release, arch, flag, top, text_qc, comp, hqc, declared, is_hip, model_dtype, model_kv)
                refusal, method, fix = got.refusal, got.quant_method, got.fix
            except EngineInputError:
                pass  # a path not followed for the KV cache, which this release does not read anyway
        return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}; this release reads no quantization config "
                            "for it)", quant_method=method, declared=declared, note=ignored(why), refusal=refusal,
                            fix=fix)
    return _resolve(release, arch, flag, top, text_qc, comp, hqc, declared, is_hip, model_dtype, model_kv)


def _resolve(release: str, arch: str, flag: str | None, top, text_qc, comp, hqc, declared: str | None, is_hip: bool,
             model_dtype: str, model_kv: str) -> CheckpointKV:
    """:func:`checkpoint_kv` from 0.4.10.post2 on (the quantization method, its class, the attribute)."""

    def ignored(why: str) -> str | None:
        return (f"the checkpoint declares an FP8 KV cache ({declared}), which SGLang {release} does not use: {why}; "
                f"the KV cache stays in {model_dtype} (pass --kv-cache-dtype fp8_e4m3 for an FP8 cache)"
                if declared else None)


    # --- which quantization method the release loads the checkpoint with (q_detect, q_verify) --------------------
    if top is not None:
        qcfg, where = top, "config.json's quantization_config"
        method = str(top.get("quant_method") or "").lower()
        rewrite = (release == "0.5.9" and "quant_method" not in top) or (
            at_least(release, "0.5.10.post1") and method in ("", "modelopt"))
        if rewrite:
            parsed = _parse_modelopt(release, top)
            method = parsed or method
            where += f", renamed {parsed} ({cite(release, 'q_cfg_rewrite')})" if parsed else ""
        is_modelopt = method.startswith("modelopt") or method == "mxfp8" or (
            not method and "quant_algo" in top)
    elif comp is not None:
        qcfg, where = comp, "config.json's compression_config"
        method = str(comp.get("quant_method") or "").lower()
        is_modelopt = False
    elif hqc is not None:
        parsed = _parse_modelopt(release, hqc["quantization"])
        if parsed is None:
            raise _not_modelled(f"hf_quant_config.json quant_algo {hqc['quantization'].get('quant_algo')!r}, which "
                                f"SGLang {release} does not map to a quantization method ({cite(release, 'q_file')})")
        qcfg, where = {"quant_method": parsed, "quant_algo": hqc["quantization"].get("quant_algo")}, (
            f"hf_quant_config.json -> {parsed} ({cite(release, 'q_file')})")
        method = parsed
        is_modelopt = True
    else:
        if text_qc is not None and declared:
            raise _not_modelled("a quantization_config only inside text_config (SGLang's quant_method detection, "
                                f"{cite(release, 'q_detect')}, reads the top-level one)")
        return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}: the checkpoint has no quantization "
                            "config)", quant_method=flag, declared=declared)
    if method in ("modelopt_mixed_or_w4afp8", "modelopt_mixed", "w4afp8", "mxfp8") or "MIXED" in str(
            qcfg.get("quant_algo") or "").upper():
        if declared:
            raise _not_modelled(f"the KV cache of a ModelOpt {qcfg.get('quant_algo')} checkpoint on SGLang {release} "
                                "(its own quantization classes)")
        return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}: no FP8 KV cache declared)",
                            quant_method=method, declared=None)
    if is_modelopt and is_hip:
        if declared:
            raise _not_modelled(f"a ModelOpt checkpoint on ROCm with SGLang {release} (petit_nvfp4 or a ROCm refusal, "
                                f"{cite(release, 'q_verify')})")
        return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}: no FP8 KV cache declared)",
                            quant_method=method, declared=None)

    quant_method = method or (flag or "")
    override = None
    if at_least(release, "0.5.7") and is_modelopt:
        algo = str(qcfg.get("quant_algo") or "").upper()
        if flag == "modelopt":
            if at_least(release, "0.5.23"):
                override = _ALGO_0523.get(algo) if _ALGO_0523.get(algo) != "mxfp8" else None
            elif "FP8" in algo:
                override = "modelopt_fp8"
            elif "NVFP4" in algo or "FP4" in algo:
                override = "modelopt_fp4"
        if override is None and quant_method in ("modelopt_fp8", "modelopt_fp4"):
            override = quant_method
    note = None
    if override:
        chosen = override
    elif flag is None:
        chosen = quant_method
    elif flag != quant_method:
        compat = dict(_COMPAT_OLD)
        if at_least(release, "0.5.7"):
            compat["modelopt_fp8"] = ("modelopt",)
        if at_least(release, "0.5.23"):
            compat["modelopt_fp4"] = ("modelopt", "fp8")
        if quant_method not in compat.get(flag, ()):
            return CheckpointKV(None, f"SGLang {release} refuses --quantization {flag} for this checkpoint",
                                quant_method=None, declared=declared, refusal=(
                                    f"Quantization method specified in the model config ({quant_method}) does not "
                                    f"match the quantization method specified in the `quantization` argument ({flag}) "
                                    f"(ValueError, {cite(release, 'q_compat')})"))
        chosen = flag
    else:
        chosen = flag
    if not chosen:
        raise _not_modelled(f"{where} names no quant_method (SGLang {release} then looks for a method named '', "
                            f"{cite(release, 'q_unknown')})")
    if is_modelopt and chosen.startswith("modelopt"):
        names = _MODELOPT_NAMES.get(release, ("modelopt", "modelopt_fp8", "modelopt_fp4"))
        if chosen not in names:
            hint = " modelopt_fp4" if "FP4" in str(qcfg.get("quant_algo") or "").upper() else ""
            return CheckpointKV(None, f"SGLang {release} has no quantization method {chosen!r}", quant_method=None,
                                declared=declared, refusal=(
                                    f"Unknown quantization method: {chosen} (ValueError, {cite(release, 'q_unknown')}; "
                                    f"SGLang {release} registers {', '.join(names)})"
                                    + (f": pass --quantization{hint}" if hint else "")), fix=hint.strip() or None)
        if release in ("0.5.7", "0.5.8.post1", "0.5.9") and chosen == "modelopt" and top is not None \
                and "FP4" in str(top.get("quant_algo") or "").upper() and flag is None:
            # config.json's quant_method "modelopt" is not renamed before 0.5.9 / 0.5.10.post1: ModelOptFp8Config
            # refuses NVFP4 unless --quantization becomes modelopt / modelopt_fp4, which ServerArgs does for some
            # architectures on SM100 (it copies the checkpoint's quant_method into --quantization). The KV cache is
            # the one SGLang starts with: ModelOptFp4Config's.
            note = (f"SGLang {release} starts with this checkpoint only when --quantization is modelopt_fp4 (or "
                    f"modelopt): config.json's quant_method 'modelopt' selects ModelOptFp8Config, which refuses "
                    f"{top.get('quant_algo')} ({cite(release, 'mo_fp8_algo')}), unless ServerArgs copies it into "
                    f"--quantization for the architecture on SM100 ({cite(release, 'mo_override')} then picks "
                    "modelopt_fp4); pass --quantization modelopt_fp4 to be sure. The KV cache is what "
                    "ModelOptFp4Config gives.")
            chosen = "modelopt_fp4"

    # --- the class's kv_cache_quant_algo -------------------------------------------------------------------------
    d = top if top is not None else text_qc if text_qc is not None else comp if comp is not None else hqc
    attr, why = _kv_attr(release, chosen, d)
    if isinstance(attr, tuple):  # a start-up refusal
        return CheckpointKV(None, f"SGLang {release} fails to read the quantization config", quant_method=chosen,
                            declared=declared, refusal=attr[0],
                            fix="modelopt_fp4" if "--quantization modelopt_fp4" in attr[0] else None)
    src_where = f"{where}; quantization method {chosen}"
    if isinstance(attr, str) and attr.upper() == "FP8":
        status, at = quant_config_holder(release, arch)
        if status == "holds":
            return CheckpointKV("fp8_e4m3", f"{cite(release, 'kv_auto')} (auto -> fp8_e4m3: {src_where}; {why}; "
                                f"{arch} keeps quant_config, sglang=={release} {at})", quant_method=chosen,
                                declared=declared, note=note)
        if status == "none":
            return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}: {arch} keeps no quant_config, "
                                f"sglang=={release} {at})", quant_method=chosen, declared=declared,
                                note=_join(ignored(f"{why}, but the model class {arch} keeps no self.quant_config "
                                                   f"(sglang=={release} {at}), so auto finds none "
                                                   f"({cite(release, 'kv_auto')})"), note))
        raise _not_modelled(f"whether SGLang {release}'s {arch} exposes the loaded quant_config ({status}: {at})")
    return CheckpointKV(None, f"{cite(release, 'kv_auto')} ({model_kv}: {src_where}; {why})", quant_method=chosen,
                        declared=declared, note=_join(ignored(why), note))


def _join(*notes: str | None) -> str | None:
    return " ".join(n for n in notes if n) or None


def _kv_attr(release: str, method: str, d: dict[str, Any] | None) -> tuple[Any, str]:
    """``(kv_cache_quant_algo, why)`` of the class registered as ``method``, built from ``d`` (the dict
    ``get_quant_config`` passes to ``from_config``); ``((refusal,), "")`` when ``from_config`` raises."""
    if method in ("modelopt", "modelopt_fp8"):
        return _modelopt_fp8(release, d or {})
    if method == "modelopt_fp4":
        return _modelopt_fp4(release, d or {})
    if method in ("compressed-tensors", "compressed_tensors"):
        if not at_least(release, "0.5.23"):
            return None, "CompressedTensorsConfig has no kv_cache_quant_algo in this release"
        s = (d or {}).get("kv_cache_scheme")
        ok = (isinstance(s, dict) and s.get("type") == "float" and s.get("num_bits") == 8
              and s.get("strategy") == "tensor" and s.get("symmetric", True) and not s.get("dynamic", False))
        return ("FP8" if ok else None), (
            f"CompressedTensorsConfig.kv_cache_quant_algo is FP8 for a static symmetric per-tensor float8 "
            f"kv_cache_scheme ({cite(release, 'ct_kv_attr')}, {cite(release, 'ct_kv_scheme')}), "
            f"here {json.dumps(s, sort_keys=True)}")
    if method == "fp8":
        if not at_least(release, "0.5.23"):
            return None, "Fp8Config has no kv_cache_quant_algo in this release"
        v = (d or {}).get("kv_cache_quant_algo")
        return v, f"Fp8Config reads kv_cache_quant_algo {v!r} ({cite(release, 'fp8_kv_attr')})"
    return None, f"the {method or 'unquantized'} quantization class has no kv_cache_quant_algo"


def _refuse(release: str, key: str, text: str) -> tuple[tuple[str], str]:
    return (f"{text} (ValueError, {cite(release, key)})",), ""


def _refuse_no_nested_block(release: str, cls: str, key: str) -> tuple[tuple[str], str]:
    """0.4.10.post2's ModelOpt configs (``cls``: ModelOptFp8Config, ModelOptFp4Config) read only
    hf_quant_config.json's nested ``quantization`` block: the refusal when a checkpoint has none, cited at ``key``."""
    return _refuse(release, key, f"{cls} needs hf_quant_config.json's nested 'quantization' block: Cannot find any "
                   f"of ['quantization'] in the model's quantization config")


def _modelopt_fp8(release: str, d: dict[str, Any]) -> tuple[Any, str]:
    """ModelOptFp8Config.from_config and the attribute it leaves (module docstring)."""
    if release == "0.4.10.post2":
        q = d.get("quantization")
        if not isinstance(q, dict):
            return _refuse_no_nested_block(release, "ModelOptFp8Config", "mo_fp8_cfg")
        algo = str(q.get("quant_algo") or "")
        if "FP8" not in algo:
            return _refuse(release, "mo_fp8_algo", f"ModelOpt only supports static FP8 quantization in SGLang, the "
                           f"checkpoint is {algo}: pass --quantization modelopt_fp4")
        return None, "not read"
    flat = d.get("quant_algo") is not None
    if flat:
        algo = str(d["quant_algo"])
        scheme = d.get("kv_cache_scheme")
        if isinstance(scheme, dict):
            kv = "FP8" if scheme.get("type") == "float" and scheme.get("num_bits") == 8 else None
        elif at_least(release, "0.5.23"):
            kv = d.get("kv_cache_quant_algo")
        elif scheme and not at_least(release, "0.5.9"):
            raise _not_modelled(f"a non-dict kv_cache_scheme {scheme!r} (ModelOptFp8Config calls .get on it, "
                                f"{cite(release, 'mo_fp8_flat_kv')})")
        else:
            kv = None
        reads = ("kv_cache_scheme, else kv_cache_quant_algo" if at_least(release, "0.5.23")
                 else "only kv_cache_scheme")
        why = f"ModelOptFp8Config reads {reads} in config.json's flat format ({cite(release, 'mo_fp8_flat_kv')}): {kv!r}"
    else:
        q = d.get("quantization")
        if not isinstance(q, dict) or q.get("quant_algo") is None:
            return _refuse(release, "mo_fp8_algo", "Cannot find 'quant_algo' in the model's quantization config")
        algo, kv = str(q["quant_algo"]), q.get("kv_cache_quant_algo")
        why = (f"ModelOptFp8Config reads quantization.kv_cache_quant_algo {kv!r} "
               f"({cite(release, 'mo_fp8_nested_kv')})")
    if (algo != "FP8") if at_least(release, "0.5.23") else ("FP8" not in algo):
        return _refuse(release, "mo_fp8_algo", f"ModelOptFp8Config refuses quant_algo {algo}"
                       + (": pass --quantization modelopt_fp4" if "FP4" in algo.upper() else ""))
    if not at_least(release, "0.5.7"):
        return None, (f"{why}, but keeps it as kv_cache_quant_method ({cite(release, 'mo_fp8_kv_attr')}), which "
                      f"auto does not read: it reads kv_cache_quant_algo ({cite(release, 'kv_auto')})")
    return kv, f"{why} -> ModelOptQuantConfig.kv_cache_quant_algo ({cite(release, 'mo_fp8_kv_attr')})"


def _modelopt_fp4(release: str, d: dict[str, Any]) -> tuple[Any, str]:
    """ModelOptFp4Config.from_config's kv_cache_quant_algo (module docstring)."""
    if release == "0.4.10.post2":
        q = d.get("quantization")
        if not isinstance(q, dict):
            return _refuse_no_nested_block(release, "ModelOptFp4Config", "mo_fp4_cfg")
        if q.get("quant_algo") not in ("FP8", "NVFP4"):
            return _refuse(release, "mo_fp4_algo", f"ModelOpt currently only supports: FP8, NVFP4 (got "
                           f"{q.get('quant_algo')})")
        return None, "not read"
    if at_least(release, "0.5.23") and str(d.get("quant_method", "")).lower() == "fp8":
        raise _not_modelled("--quantization modelopt_fp4 on an FP8 checkpoint (online NVFP4 requantization)")
    if d.get("quant_algo") is not None:
        algo = d["quant_algo"]
        scheme = d.get("kv_cache_scheme")
        key_first = release in ("0.5.3", "0.5.3.post1", "0.5.7", "0.5.8.post1")
        kv = d.get("kv_cache_quant_algo") if key_first else None
        if not kv:
            if isinstance(scheme, dict):
                kv = "FP8" if scheme.get("type") == "float" and scheme.get("num_bits") == 8 else "auto"
            elif isinstance(scheme, str) and scheme and at_least(release, "0.5.7"):
                kv = _FP4_STR_SCHEME.get(scheme.strip().upper(), "auto")
            elif scheme and not at_least(release, "0.5.7"):
                raise _not_modelled(f"a non-dict kv_cache_scheme {scheme!r} (ModelOptFp4Config calls .get on it, "
                                    f"{cite(release, 'mo_fp4_flat_kv')})")
            elif at_least(release, "0.5.23"):
                kv = d.get("kv_cache_quant_algo") or "auto"
            else:
                kv = "auto"
        order = ("kv_cache_quant_algo, then kv_cache_scheme" if key_first else
                 "kv_cache_scheme, then kv_cache_quant_algo" if at_least(release, "0.5.23") else
                 "only kv_cache_scheme")
        why = f"ModelOptFp4Config reads {order} in config.json's flat format ({cite(release, 'mo_fp4_flat_kv')}): {kv!r}"
    else:
        q = d.get("quantization")
        if not isinstance(q, dict) or q.get("quant_algo") is None:
            return _refuse(release, "mo_fp4_cfg", "Cannot find 'quant_algo' in the model's quantization config")
        algo, kv = q["quant_algo"], q.get("kv_cache_quant_algo") or "auto"
        why = (f"ModelOptFp4Config reads quantization.kv_cache_quant_algo {kv!r} "
               f"({cite(release, 'mo_fp4_nested_kv')})")
    allowed = ("FP8", "NVFP4", "NVFP4_AWQ", "W4A16_NVFP4") if at_least(release, "0.5.23") else ("FP8", "NVFP4")
    if algo not in allowed:
        return _refuse(release, "mo_fp4_algo", f"ModelOpt currently only supports: {', '.join(allowed)} (got {algo})")
    return kv, f"{why} -> kv_cache_quant_algo ({cite(release, 'mo_fp4_kv_attr')})"
