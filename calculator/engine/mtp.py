"""Does a model have an MTP head vLLM will run, and how many MTP layers (pure, no Django).

vLLM 0.32 runs ``--speculative-config '{"method": "mtp", ...}'`` by loading the target's own checkpoint as the
draft with ``SpeculativeConfig.hf_config_override`` (``vllm/config/speculative.py:661-1073``): the target's
``model_type`` / ``architectures[0]`` is rewritten to an MTP model type (``deepseek_mtp``, ``qwen3_next_mtp``,
``qwen3_5_mtp``...) and ``n_predict`` is read from a per-family config key. A draft whose type is not one of
``MTPModelTypes`` (:38-66) ends in ``NotImplementedError("Unsupported speculative method: 'mtp'")``
(:1386-1391). The per-architecture names of ``MTPModelTypes`` are accepted as ``method`` and replaced by ``mtp``
(:1141-1145, "method `%s` is deprecated and replaced with mtp").

:func:`mtp_head` mirrors that table for a ``config.json`` dict; every rule cites the line it follows.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# vLLM's per-architecture MTP method names (``MTPModelTypes``, vllm/config/speculative.py:38-66 in 0.32, plus
# ``step5_mtp`` of 0.33 and ``nemotron3_5_transcribe_mtp`` of 0.34, :63 in 0.34.0): each is accepted as ``method``
# and run as ``mtp`` (:1141-1145). The list a release takes is ``speculative.mtp_model_types`` of its compat data
# (compat/data/vllm-<release>.json); this is their union over the covered releases (tests/test_mtp_heads.py checks it
# against those files).
MTP_METHOD_NAMES: tuple[str, ...] = (
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "deepseek_mtp", "dots3_note_mtp", "ernie_mtp", "exaone4_5_mtp",
    "exaone_moe_mtp", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp", "glm5_next_mtp", "glm_ocr_mtp", "hy_v3_mtp",
    "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp", "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp",
    "nemotron3_5_transcribe_mtp", "nemotron_h_mtp", "pangu_ultra_moe_mtp", "qwen3_5_mtp", "qwen3_next_mtp",
    "qwen4_exp_mtp", "step3p5_mtp", "step5_mtp",
)

SRC = "vllm/config/speculative.py"


class MtpHead(BaseModel):
    """The MTP draft vLLM builds from a target checkpoint.

    ``layers``: MTP layers the draft model builds (its ``num_mtp_layers``); ``n_predict``: what vLLM records as the
    draft's ``n_predict`` (None when the config has no key: then ``num_speculative_tokens`` is required and not
    checked for divisibility, speculative.py:1478-1501); ``draft_type``: the rewritten ``model_type``; ``key``: the
    config key (or default) the count came from; ``source``: file:line of each rule."""

    layers: int
    n_predict: int | None
    draft_type: str
    key: str
    source: str


class NoMtpHead(BaseModel):
    """Why vLLM runs no MTP draft for this model (``reason``, in vLLM's words where it has them; ``source``)."""

    reason: str
    source: str


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _text(config: dict[str, Any]) -> dict[str, Any]:
    t = config.get("text_config")
    return t if isinstance(t, dict) else config


def mtp_head(config: dict[str, Any]) -> MtpHead | NoMtpHead:
    """The MTP draft vLLM 0.32 makes of ``config`` (``config.json`` as a dict), or why there is none.

    Follows ``SpeculativeConfig.hf_config_override`` (vllm/config/speculative.py:661-1073), family by family:
    the rewritten ``model_type``, the key ``n_predict`` is read from, and the number of layers the MTP model file
    builds (its own default where the key is absent). A family vLLM maps but whose count is 0 or absent with no
    default has no head (the checkpoint stores no MTP weights: DeepSeek-style configs with
    ``num_nextn_predict_layers: 0``, e.g. Kimi K2)."""
    if not isinstance(config, dict):
        return NoMtpHead(reason="config.json is not a JSON object", source=SRC)
    mt = str(config.get("model_type") or "")
    archs = config.get("architectures")
    arch = str(archs[0]) if isinstance(archs, list) and archs else ""
    t = _text(config)
    tmt = str(t.get("model_type") or "")

    def head(draft: str, n: int | None, key: str, line: str, built: int | None = None,
             built_src: str = "") -> MtpHead | NoMtpHead:
        layers = built if built is not None else n
        if not layers or layers < 1:
            return NoMtpHead(reason=f"{key} is {n if n is not None else 'absent'} in config.json: the checkpoint has "
                             f"no MTP layers (vLLM would build a {draft} draft of none, {SRC}:{line})",
                             source=f"{SRC}:{line}")
        src = f"{SRC}:{line} (model_type -> {draft}, n_predict = {key})" + (f"; {built_src}" if built_src else "")
        return MtpHead(layers=layers, n_predict=n, draft_type=draft, key=key, source=src)

    nn = _int(config.get("num_nextn_predict_layers"))
    if mt == "dots3_note":
        return head("dots3_note_mtp", nn if nn is not None else 1, "num_nextn_predict_layers (default 1)", "663-678")
    if mt in ("deepseek_v3", "deepseek_v32", "glm_moe_dsa"):
        return head("deepseek_mtp", nn, "num_nextn_predict_layers", "679-695",
                    built_src="DeepSeekMultiTokenPredictor builds num_nextn_predict_layers layers "
                              "(vllm/model_executor/models/deepseek_mtp.py:152)")
    if mt == "deepseek_v41":
        return NoMtpHead(reason="DeepSeek V4.1 has no classic-MTP draft: its checkpoints ship DSpark stages under "
                         "mtp.*. Use speculative method 'dspark' instead of 'mtp'.", source=f"{SRC}:1364-1375")
    if mt == "deepseek_v4":
        return head("deepseek_mtp", nn, "num_nextn_predict_layers", "696-706")
    if mt == "pangu_ultra_moe":
        return head("pangu_ultra_moe_mtp", nn, "num_nextn_predict_layers", "707-713")
    if mt == "kimi_k3":
        return head("kimi_k3_mtp", _int(t.get("num_nextn_predict_layers")), "text_config.num_nextn_predict_layers",
                    "715-723")
    if arch == "MiMoForCausalLM":
        return head("mimo_mtp", nn, "num_nextn_predict_layers", "725-734")
    if arch in ("MiMoV2ForCausalLM", "MiMoV2OmniForCausalLM", "MiMoV2FlashForCausalLM"):
        # "vLLM currently supports only the first MiMo-V2 MTP layer" (vllm/model_executor/models/mimo_v2_mtp.py:53-54)
        return head("mimo_v2_mtp", 1, "the first MTP layer only (_MIMO_V2_*_NUM_MTP_LAYERS = 1, mimo_v2_mtp.py:53-54)",
                    "736-776")
    if arch == "Glm4MoeForCausalLM":
        return head("glm4_moe_mtp", nn, "num_nextn_predict_layers", "778-786")
    if arch == "Glm4MoeLiteForCausalLM":
        return head("glm4_moe_lite_mtp", nn, "num_nextn_predict_layers", "788-797")
    if arch == "GlmOcrForConditionalGeneration":
        return head("glm_ocr_mtp", nn, "num_nextn_predict_layers", "799-808")
    if mt in ("ernie4_5_moe", "ernie_mtp"):
        return head("ernie_mtp", nn, "num_nextn_predict_layers", "810-816")
    if arch == "Nemotron3_5TranscribeForConditionalGeneration":
        # from 0.34.0 (the architecture is registered from 0.34.0): the text config becomes the draft, n_predict =
        # text_config.num_nextn_predict_layers; Nemotron3_5TranscribeMTP subclasses NemotronHMTP
        # (vllm/model_executor/models/nemotron3_5_transcribe.py:634 in 0.34.0)
        return head("nemotron3_5_transcribe_mtp", _int(t.get("num_nextn_predict_layers")),
                    "text_config.num_nextn_predict_layers", "994-1010 (0.34.0)")
    nem = t if arch in ("NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3") else config
    if str(nem.get("model_type") or "") in ("nemotron_h", "nemotron_h_puzzle"):
        n = _int(nem.get("num_nextn_predict_layers"))
        if n and n > 0:
            return head("nemotron_h_mtp", n, "num_nextn_predict_layers", "818-836")
        return NoMtpHead(reason="Nemotron-H is an MTP variant only with num_nextn_predict_layers > 0 in config.json; "
                         f"this one has {n if n is not None else 'none'}, so vLLM refuses method mtp: "
                         "\"Unsupported speculative method: 'mtp'\"", source=f"{SRC}:824-829, :1386-1391")
    if mt == "qwen3_next":
        # n_predict = num_nextn_predict_layers (absent in Qwen's configs: None); Qwen3NextMultiTokenPredictor builds
        # getattr(config, "num_nextn_predict_layers", 1) layers (vllm/model_executor/models/qwen3_next_mtp.py:63)
        return head("qwen3_next_mtp", nn, "num_nextn_predict_layers", "838-844",
                    built=nn if nn is not None else 1,
                    built_src="Qwen3NextMultiTokenPredictor builds num_nextn_predict_layers layers, 1 when absent "
                              "(vllm/model_executor/models/qwen3_next_mtp.py:63)")
    if mt in ("qwen4_exp", "qwen4_exp_text"):
        n = _int(t.get("mtp_num_hidden_layers"))
        n = n if n is not None else _int(t.get("num_nextn_predict_layers"))
        return head("qwen4_exp_mtp", n, "text_config.mtp_num_hidden_layers (or num_nextn_predict_layers)", "845-865")
    if arch in ("BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration"):
        src = t if arch == "BailingMoeV3VLForConditionalGeneration" else config
        return head("bailing_hybrid_v3_mtp", _int(src.get("num_nextn_predict_layers")), "num_nextn_predict_layers",
                    "867-900")
    if mt == "bailing_hybrid" or "BailingMoeV2_5ForCausalLM" in (archs or []):
        return head("bailing_hybrid_mtp", nn, "num_nextn_predict_layers", "883-893")
    if mt == "exaone_moe":
        return head("exaone_moe_mtp", nn, "num_nextn_predict_layers", "902-909")
    if "exaone4_5" in mt:
        return head("exaone4_5_mtp", nn, "num_nextn_predict_layers", "910-916")
    if mt in ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"):
        n = _int(config.get("mtp_num_hidden_layers"))
        key = "mtp_num_hidden_layers"
        if n is None:
            n, key = _int(t.get("mtp_num_hidden_layers")), "text_config.mtp_num_hidden_layers"
        return head("qwen3_5_mtp", n, key, "917-938", built=n if n is not None else 1,
                    built_src="Qwen3_5MultiTokenPredictor builds mtp_num_hidden_layers layers of the text config, 1 "
                              "when absent (vllm/model_executor/models/qwen3_5_mtp.py:82)")
    if mt in ("intern_s2_preview", "interns2_mobius"):
        return head("qwen3_5_mtp", _int(t.get("mtp_num_hidden_layers")), "text_config.mtp_num_hidden_layers",
                    "939-962")
    if mt == "longcat_flash":
        return head("longcat_flash_mtp", nn if nn is not None else 1, "num_nextn_predict_layers (default 1)", "963-968")
    if mt in ("step3p5", "step3p7") or arch in ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration"):
        n = _int(t.get("num_nextn_predict_layers"))
        return head("step3p5_mtp", n if n is not None else 1, "num_nextn_predict_layers (default 1)", "970-981")
    if mt == "hy_v3":
        return head("hy_v3_mtp", nn, "num_nextn_predict_layers", "986-991")
    if mt == "hy_v4":
        return head("hy_v4_mtp", nn, "num_nextn_predict_layers", "993-998")
    if mt in ("inkling_mm_model", "inkling_model"):
        mc = config.get("mtp_config") if isinstance(config.get("mtp_config"), dict) else {}
        n = _int(mc.get("num_nextn_predict_layers")) or 0
        if n < 1:
            return NoMtpHead(reason="The Inkling checkpoint does not contain MTP weights", source=f"{SRC}:1000-1005")
        return head("inkling_mtp", n, "mtp_config.num_nextn_predict_layers", "1000-1017")
    if mt == "minimax_m3_vl" or arch in ("MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3MTP") \
            or mt == "minimax_m3_mtp":
        n = _int(t.get("num_mtp_modules"))
        return head("minimax_m3_mtp", n if n is not None else 1, "num_mtp_modules (default 1)", "1031-1058")
    if mt == "glm5_next":
        return head("glm5_next_mtp", _int(t.get("num_nextn_predict_layers")), "text_config.num_nextn_predict_layers",
                    "1059-1071")
    what = mt or tmt or "unknown"
    return NoMtpHead(reason=f"vLLM maps no MTP draft for model_type {what!r} ({arch or 'no architectures'}): it "
                     "refuses method mtp with \"Unsupported speculative method: 'mtp'\"",
                     source=f"{SRC}:661-1073 (hf_config_override), :1386-1391")


# Where each covered vLLM release refuses num_speculative_tokens above the MTP draft's n_predict that is not a multiple
# of it: the ``if`` and its ``raise ValueError(f"num_speculative_tokens:{...} must be divisible by n_predict=...")``,
# read from each release's wheel. SpeculativeConfig.__post_init__ (``elif`` in 0.9 / 0.10) up to 0.33.0; 0.34.0 moved it
# to SpeculatorConfig.resolve_num_speculative_tokens, which MTPSpeculatorConfig calls (spec_decode/mtp/config.py:101-107).
N_PREDICT_RULE: dict[str, str] = {
    "0.9.2": "vllm/config.py:2738-2743",
    "0.10.0": "vllm/config.py:2889-2894",
    "0.10.1": "vllm/config/__init__.py:2196-2201",
    "0.10.1.1": "vllm/config/__init__.py:2196-2201",
    "0.10.2": "vllm/config/__init__.py:2221-2226",
    "0.11.2": "vllm/config/speculative.py:419-427",
    "0.12.0": "vllm/config/speculative.py:418-426",
    "0.13.0": "vllm/config/speculative.py:419-427",
    "0.14.1": "vllm/config/speculative.py:431-439",
    "0.15.1": "vllm/config/speculative.py:464-472",
    "0.16.0": "vllm/config/speculative.py:481-489",
    "0.17.1": "vllm/config/speculative.py:542-550",
    "0.18.1": "vllm/config/speculative.py:554-562",
    "0.19.0": "vllm/config/speculative.py:569-577",
    "0.19.1": "vllm/config/speculative.py:569-577",
    "0.20.2": "vllm/config/speculative.py:662-670",
    "0.21.0": "vllm/config/speculative.py:728-736",
    "0.22.1": "vllm/config/speculative.py:769-777",
    "0.23.0": "vllm/config/speculative.py:772-780",
    "0.24.0": "vllm/config/speculative.py:811-819",
    "0.25.1": "vllm/config/speculative.py:927-935",
    "0.26.0": "vllm/config/speculative.py:980-988",
    "0.27.1": "vllm/config/speculative.py:1011-1019",
    "0.28.0": "vllm/config/speculative.py:1073-1081",
    "0.29.0": "vllm/config/speculative.py:1421-1429",
    "0.30.0": "vllm/config/speculative.py:1478-1486",
    "0.31.0": "vllm/config/speculative.py:1487-1495",
    "0.32.0": "vllm/config/speculative.py:1493-1501",
    "0.33.0": "vllm/config/speculative.py:1604-1612",
    "0.34.0": "vllm/v1/worker/gpu/spec_decode/speculator_config.py:283-291",
}


def n_predict_rule(release: str) -> str | None:
    """``file:first-last`` of the n_predict rule in ``release`` (:data:`N_PREDICT_RULE`; every covered release has
    it), None for a release the table does not hold."""
    return N_PREDICT_RULE.get(release)


def n_predict_refusal(k: int, n: int, release: str) -> str:
    """vLLM's start-up refusal of ``num_speculative_tokens`` ``k`` above the MTP draft's ``n_predict`` ``n`` that is not
    a multiple of it (vLLM reuses the n_predict MTP modules in turn), citing the rule's lines in ``release``
    (:data:`N_PREDICT_RULE`)."""
    where = n_predict_rule(release)
    return (f"must be divisible by n_predict={n}, the checkpoint's MTP modules that vLLM reuses in turn (vLLM "
            f"{release}: \"num_speculative_tokens:{k} must be divisible by n_predict={n}\""
            + (f", {where})" if where else ")"))

