"""How many drafted tokens the target accepts: a per-position acceptance model by method, number of
drafts ``k``, workload class and temperature, built from public figures (each with its URL). No Django.

Model (``calculator/data/spec_acceptance.json`` holds the figures and says where each comes from):

* position ``i`` (1-based) of a draft is accepted, given positions ``1..i-1`` were, with probability
  ``a_i = min(0.99, α₁ × d^(i−1))``: ``α₁`` the first-position rate, ``d`` the per-position decay.
  EAGLE-style heads and MTP modules drift as they feed on their own guesses, so ``d < 1`` (vLLM logs
  ``per_position_acceptance_rate``, the unconditional ``Π_{j≤i} a_j``, vllm/v1/spec_decode/metrics.py).
* mean acceptance length (vLLM's "Mean acceptance length", incl. the bonus token)::

      AL(k) = 1 + Σ_{i=1..k} Π_{j=1..i} a_j

  with ``d = 1`` this is Leviathan et al. 2023 eq. 1, ``(1 − α^(k+1)) / (1 − α)``.
* ``α₁`` for a method is solved from its base public figure so that the model reproduces that figure's
  ``AL`` at its own ``k``; the
  workload class multiplies ``α₁`` by the ratio of ``α₁`` solved from acceptance lengths measured on
  several datasets with one drafter; temperature ``T`` multiplies it by ``1 − (1 − r) × min(T, 2)``,
  ``r`` the temperature-1 over temperature-0 ratio of one published pair.
* a user's acceptance rate (accepted / drafted tokens, vLLM's definition: ``AL = 1 + k × rate``) or
  acceptance length (at the user's ``k``) replaces all of this.

The range (``low``/``high``) is the spread of the source figures where there are several, else ±15 %
on ``α₁`` for a figure from another model or dataset, ±5 % for a user's own measurement.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .errors import EngineInputError

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "spec_acceptance.json"
TYPICAL_FILE = Path(__file__).resolve().parent.parent / "data" / "spec_decode_typical.json"

WORKLOADS = ("chat", "code", "reasoning", "creative", "summarization", "random", "repetitive")
_WORKLOAD_ALIASES = {
    "chat": "chat", "mt-bench": "chat", "sharegpt": "chat", "dialogue": "chat", "instruction": "chat",
    "code": "code", "coding": "code", "humaneval": "code", "mbpp": "code", "code-edit": "code",
    "reasoning": "reasoning", "math": "reasoning", "gsm8k": "reasoning", "aime": "reasoning",
    "creative": "creative", "writing": "creative", "story": "creative",
    "summarization": "summarization", "summary": "summarization", "rag": "summarization", "cnn": "summarization",
    "random": "random", "repetitive": "repetitive",
}
RANGE_FIGURE = 0.15  # ± on α₁ when the figure is from another model or dataset
RANGE_USER = 0.05  # ± on α₁ for a user's own measurement (sampling noise of a benchmark run)


def normalize_workload(workload: str | None) -> str | None:
    """The workload class (one of :data:`WORKLOADS`) for ``workload`` or one of its aliases
    (``math`` → ``reasoning``, ``rag`` → ``summarization``...); ``None`` for ``None``.

    Raises:
        EngineInputError: on ``workload`` for an unknown class (the message lists the classes).
    """
    if workload is None or workload == "":
        return None
    key = workload.strip().lower()
    if key in _WORKLOAD_ALIASES:
        return _WORKLOAD_ALIASES[key]
    raise EngineInputError("workload", f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")


# ----------------------------------------------------------------------------------------------------
# the acceptance-length algebra
# ----------------------------------------------------------------------------------------------------
def conditional_rates(alpha1: float, decay: float, k: int) -> list[float]:
    """``[a_1..a_k]``, ``a_i = min(0.99, α₁ d^(i−1))`` (``a_i`` given positions before were accepted)."""
    return [min(0.99, max(0.0, alpha1 * decay ** i)) for i in range(k)]


def length_from_conditional(rates: list[float]) -> float:
    """``1 + Σ_i Π_{j≤i} a_j``: mean tokens per verification step, incl. the bonus token."""
    total, p = 1.0, 1.0
    for a in rates:
        p *= a
        total += p
    return total


def mean_length(alpha1: float, decay: float, k: int) -> float:
    """``AL(k)`` of the per-position model (module docstring)."""
    return length_from_conditional(conditional_rates(alpha1, decay, k))


def solve_alpha1(length: float, k: int, decay: float) -> float:
    """The ``α₁`` that gives mean acceptance length ``length`` at ``k`` drafts with decay ``decay``
    (bisection; clamped to [0, 0.99])."""
    if length <= 1:
        return 0.0
    lo, hi = 0.0, 0.99
    if mean_length(hi, decay, k) <= length:
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if mean_length(mid, decay, k) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def solve_alpha1_lengths(lengths: dict[int, float], decay: float) -> float:
    """The ``α₁`` whose ``AL(k)`` (decay ``decay``) is closest, in least squares, to mean acceptance lengths
    measured at several ``k`` (``{k: AL}``, one run per ``k`` with one drafter on one workload).

    One parameter against all the lengths: the per-position decay stays the method's (from its logs), only the
    level comes from these figures. ``AL`` grows with ``α₁`` at every ``k``, so the squared error falls below the
    smallest of the ``α₁`` solved at each single ``k`` and rises above the largest: its minimum lies between them
    (ternary search there).

    Args:
        lengths: ``{k: mean acceptance length incl. the bonus token}``, at least one entry.
        decay: the per-position decay ``d`` of the method.
    """
    singles = [solve_alpha1(al, k, decay) for k, al in lengths.items()]
    lo, hi = min(singles), max(singles)

    def sse(a: float) -> float:
        return sum((mean_length(a, decay, k) - al) ** 2 for k, al in lengths.items())

    for _ in range(100):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if sse(m1) <= sse(m2):
            hi = m2
        else:
            lo = m1
    return (lo + hi) / 2


# ----------------------------------------------------------------------------------------------------
# the public figures
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    """One public acceptance figure: mean acceptance length at ``k`` (and per-position rates if logged)."""

    case_id: str
    source_url: str
    method: str
    workload: str
    k: int
    mean_length: float
    per_position: tuple[float, ...] | None = None


@lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(DATA_FILE.read_text())


@lru_cache(maxsize=1)
def figures() -> dict[str, Figure]:
    """Every figure the model uses, by case id: the typical figures (copied from the shared ground truth)
    plus the extra paper figures of ``spec_acceptance.json``."""
    out: dict[str, Figure] = {}
    for row in json.loads(TYPICAL_FILE.read_text())["figures"]:
        out[row["case_id"]] = Figure(row["case_id"], row["source_url"], row["method"], row["workload"],
                                     row["num_speculative_tokens"], row["mean_acceptance_length"],
                                     tuple(row["per_position_acceptance_rate"] or ()) or None)
    for row in _data()["extra_figures"]:
        out[row["case_id"]] = Figure(row["case_id"], row["source_url"], row["method"], row["workload"],
                                     row["num_speculative_tokens"], row["mean_acceptance_length"])
    return out


def decay_from_logs(case_ids: list[str]) -> float:
    """Geometric mean of ``a_{i+1} / a_i`` over the listed per-position logs (conditional rates
    ``a_i = p_i / p_{i−1}`` from vLLM's unconditional ``p_i``); 1.0 when none is listed."""
    ratios: list[float] = []
    for cid in case_ids:
        p = figures()[cid].per_position
        if not p:
            continue
        cond = [p[0]] + [p[i] / p[i - 1] for i in range(1, len(p)) if p[i - 1] > 0]
        ratios += [cond[i + 1] / cond[i] for i in range(len(cond) - 1) if cond[i] > 0]
    if not ratios:
        return 1.0
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


@dataclass(frozen=True)
class MethodModel:
    method: str
    alpha1: float | None
    decay: float
    base: Figure | None
    decay_sources: tuple[str, ...]
    workload_group: str | None


@lru_cache(maxsize=None)
def method_model(method: str) -> MethodModel:
    """``α₁`` (chat, temperature 0, solved from the base figure) and ``d`` for ``method``."""
    spec = _data()["methods"].get(method)
    if spec is None:
        return MethodModel(method, None, 1.0, None, (), None)
    decay = decay_from_logs(spec["decay_from"])
    base = figures().get(spec["base"]) if spec["base"] else None
    alpha1 = None
    if base is not None:
        alpha1 = solve_alpha1(base.mean_length, base.k, decay)  # reproduces the figure at its own k
    return MethodModel(method, alpha1, decay, base, tuple(spec["decay_from"]), spec["workload_factors"])


@lru_cache(maxsize=None)
def workload_factor(group: str | None, workload: str | None) -> tuple[float, str]:
    """``(factor on α₁, source)`` for ``workload`` relative to chat within a drafter family."""
    if workload in (None, "chat") or group is None:
        return 1.0, "chat figure"
    g = _data()["workload_factors"][group]
    tau = g["tau"]
    if workload not in tau:
        return 1.0, (f"no public figure for {workload} with this method: the chat figure is used (the field guide "
                     "expects lower acceptance on creative writing, hard reasoning and high temperature)")
    decay = 1.0
    a_chat = solve_alpha1(tau["chat"], g["k"], decay)
    a_w = solve_alpha1(tau[workload], g["k"], decay)
    return a_w / a_chat, (f"{workload}/chat ratio of alpha solved from tau {tau[workload]} vs {tau['chat']} at "
                          f"k={g['k']} ({g['source_url']})")


@lru_cache(maxsize=None)
def _temperature_ratio() -> float:
    t = _data()["temperature"]
    return solve_alpha1(t["tau_t1"], t["k"], 1.0) / solve_alpha1(t["tau_t0"], t["k"], 1.0)


def temperature_factor(temperature: float | None) -> float:
    """``1 − (1 − r) × min(T, 2)``: ``r`` = α at temperature 1 over α at 0 (one published pair)."""
    if not temperature:
        return 1.0
    return max(0.0, 1 - (1 - _temperature_ratio()) * min(temperature, 2.0))


# ----------------------------------------------------------------------------------------------------
# the prediction
# ----------------------------------------------------------------------------------------------------
@dataclass
class Acceptance:
    """Predicted acceptance at ``k`` drafts. ``rates``: conditional per-position rates; ``length``: mean
    acceptance length (incl. bonus); ``low``/``high``: its range; ``alpha``: the geometric per-token
    rate with the same length; :attr:`rate`: accepted / drafted tokens (vLLM's "Avg Draft acceptance
    rate", what ``--acceptance-rate`` means); ``source``: where it comes from."""

    method: str
    k: int
    alpha1: float
    decay: float
    rates: list[float]
    length: float
    low: float
    high: float
    alpha: float
    source: str
    label: str  # "user input" | "public figure" | "public figure, other workload"
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Accepted / drafted tokens: ``(AL − 1) / k`` (vllm/v1/spec_decode/metrics.py)."""
        return (self.length - 1) / self.k

    def length_at(self, k: int, alpha1: float | None = None) -> float:
        """``AL`` at another ``k`` with the same per-position model."""
        return mean_length(self.alpha1 if alpha1 is None else alpha1, self.decay, k)

    def range_at(self, k: int) -> tuple[float, float]:
        """``(low, high)`` of ``AL`` at ``k`` for the same relative spread on ``α₁``."""
        lo_a, hi_a = _alpha_range(self.alpha1, self.label)
        return mean_length(lo_a, self.decay, k), mean_length(hi_a, self.decay, k)


def _alpha_range(alpha1: float, label: str) -> tuple[float, float]:
    w = RANGE_USER if label == "user input" else RANGE_FIGURE
    return alpha1 * (1 - w), min(0.99, alpha1 * (1 + w))


def geometric_alpha(length: float, k: int) -> float:
    """The geometric per-token rate with mean acceptance length ``length`` at ``k``."""
    return solve_alpha1(length, k, 1.0) if length < k + 1 else 1.0


def _norm_model(name: str | None) -> str:
    return (name or "").strip().lower().replace("__", "/").removesuffix(".json")


def target_figure(target: str | None, method: str, runtime: str | None = None) -> dict | None:
    """The ``target_figures`` row measured on ``target`` (repo id, or a label/file name that ends with it)
    with ``method``, or ``None``. A row that names the ``runtime`` it was measured on applies to that runtime
    only: the same head and chain accept fewer tokens in SGLang's EAGLE than in vLLM's
    (https://github.com/sgl-project/sglang/issues/8228), so a length measured on one does not carry over."""
    t = _norm_model(target)
    if not t:
        return None
    for row in _data().get("target_figures", []):
        rid = row["target"].lower()
        if row.get("runtime") and row["runtime"] != runtime:
            continue
        if row["method"] == method and (t == rid or t.endswith("/" + rid.split("/")[-1]) or t == rid.split("/")[-1]):
            return row
    return None


def predict_acceptance(method: str, k: int, *, workload: str | None = None, temperature: float | None = None,
                       acceptance_rate: float | None = None, acceptance_length: float | None = None,
                       target: str | None = None, runtime: str | None = None,
                       head: str | None = None) -> Acceptance | None:
    """Acceptance of ``method`` with ``k`` drafts on ``workload`` at ``temperature``.

    Args:
        method: vLLM's ``speculative_config.method`` (``eagle``, ``eagle3``, ``mtp``, ``ngram``, ``suffix``,
            ``draft_model``).
        k: ``num_speculative_tokens`` (≥ 1).
        workload: a class of :data:`WORKLOADS` or an alias.
        temperature: sampling temperature of the traffic (``None``/0: greedy).
        acceptance_rate: accepted / drafted tokens (0–1), vLLM's "Avg Draft acceptance rate" (the
            validator's ``acceptance_rate``): ``AL = 1 + k × rate``; other ``k`` follow the geometric rate
            with that length.
        acceptance_length: mean acceptance length at this ``k`` (1 to k+1), as vLLM/SGLang log it.
        target: the target model's repo id (or a label ending with it): a figure measured on that target
            (``target_figures``) replaces the method's base figure; a row with ``lengths_by_k`` (lengths
            measured at several ``k``) sets ``α₁`` by :func:`solve_alpha1_lengths` over all of them.
        runtime: the serving runtime (``vllm``, ``sglang``, ...): a ``target_figures`` row measured on one
            runtime applies to it only (:func:`target_figure`).
        head: the draft head the user named (``speculative_config.model``) for EAGLE / EAGLE-3: a ``target_figures``
            row measured with another head does not apply (the method's base figure stands in, with a note that it
            was measured with another head); ``None``: the head the row names (the catalogued one).

    Returns:
        the :class:`Acceptance`, or ``None`` when no public figure fits and the user gave none (ngram on
        anything but repetitive text, draft models): the caller asks for ``--acceptance-rate``.

    Raises:
        EngineInputError: ``acceptance_rate`` outside [0, 1], ``acceptance_length`` outside [1, k+1], both
        given, an unknown workload, or ``k < 1``.
    """
    if k < 1:
        raise EngineInputError("num_speculative_tokens", f"must be at least 1, got {k}")
    wl = normalize_workload(workload)
    if acceptance_rate is not None and acceptance_length is not None:
        raise EngineInputError("acceptance_length", "give either --acceptance-rate or --acceptance-length, not both")
    if acceptance_length is not None:
        if not 1 <= acceptance_length <= k + 1:
            raise EngineInputError("acceptance_length", f"must be between 1 and k+1 = {k + 1} (incl. the bonus "
                                                        f"token), got {acceptance_length}")
        a = geometric_alpha(acceptance_length, k)
        lo, hi = _alpha_range(a, "user input")
        return Acceptance(method, k, a, 1.0, conditional_rates(a, 1.0, k), acceptance_length,
                          mean_length(lo, 1.0, k), mean_length(hi, 1.0, k), a,
                          "user input (--acceptance-length), mean tokens per verification step incl. the bonus",
                          "user input")
    if acceptance_rate is not None:
        if not 0 <= acceptance_rate <= 1:
            raise EngineInputError("acceptance_rate", f"must be between 0 and 1 (accepted / drafted tokens), got "
                                                      f"{acceptance_rate}")
        al = 1 + k * acceptance_rate  # vLLM: mean_acceptance_length = 1 + accepted / drafts, rate = accepted / drafted
        a = geometric_alpha(al, k)
        lo, hi = _alpha_range(a, "user input")
        return Acceptance(method, k, a, 1.0, conditional_rates(a, 1.0, k), al, mean_length(lo, 1.0, k),
                          mean_length(hi, 1.0, k), a,
                          "user input (--acceptance-rate: accepted / drafted tokens, vLLM's 'Avg Draft acceptance "
                          "rate'), i.e. mean acceptance length 1 + k x rate", "user input")

    mm = method_model(method)
    notes: list[str] = []
    if wl == "repetitive" or (mm.alpha1 is None and wl is not None):
        # a figure measured on exactly this workload class (sd-001: ngram on a repetitive completion)
        hit = next((f for f in figures().values() if f.method == method and wl and wl in f.workload.lower()), None)
        if hit is not None:
            a1 = solve_alpha1(hit.mean_length, hit.k, mm.decay)
            return _finish(method, k, a1, mm.decay, temperature,
                           f"public figure {hit.case_id} ({hit.source_url}): AL {hit.mean_length} at k={hit.k} on "
                           f"{hit.workload}", "public figure", notes)
    if mm.alpha1 is None:
        return None
    factor, fsrc = workload_factor(mm.workload_group, wl)
    tf_row = target_figure(target, method, runtime)
    if tf_row is not None and head and _norm_model(head) != _norm_model(tf_row["head"]):
        tf_row = None  # measured with another head: it says nothing of this one
    if method == "mtp" and tf_row is None and target and not any(
            f in _norm_model(target) for f in ("deepseek-v3", "deepseek-r1")):
        notes.append(f"no public MTP acceptance figure for {target}: the one used was measured on DeepSeek-V3's MTP "
                     f"module ({mm.base.case_id}); this model's MTP layers may accept differently: give "
                     "--acceptance-rate or --acceptance-length as the runtime logs it")
    if head and method in ("eagle", "eagle3") and tf_row is None:
        notes.append(f"no public acceptance figure for the head {head}: the method's figure, measured with another "
                     "head, stands in for it; give --acceptance-rate or --acceptance-length as the runtime logs it "
                     "for this head")
    if tf_row is not None:
        by_k = {int(kk): float(v) for kk, v in (tf_row.get("lengths_by_k") or {}).items()}
        if by_k:  # lengths measured at several k: alpha_1 from all of them (least squares, the method's decay)
            a1 = solve_alpha1_lengths(by_k, mm.decay)
            measured = "AL " + ", ".join(f"{v:g}" for v in by_k.values()) + \
                f" at k={min(by_k)}..{max(by_k)} (least squares over all of them)"
        else:
            a1 = solve_alpha1(tf_row["mean_acceptance_length"], tf_row["k"], mm.decay)
            measured = f"AL {tf_row['mean_acceptance_length']} at k={tf_row['k']}"
        a1 /= temperature_factor(tf_row.get("temperature"))
        src = (f"figure {tf_row['case_id']} for {tf_row['target']} with {tf_row['head']} ({tf_row['source_url']}): "
               f"{measured} on {tf_row['workload']} at temperature "
               f"{tf_row.get('temperature')} -> alpha_1 {a1:.3f} at temperature 0; per-position decay {mm.decay:.3f}")
        if factor != 1.0:
            src += f"; x{factor:.3f} for {wl}: {fsrc}"
        elif wl not in (None, "chat"):
            notes.append(fsrc)
        return _finish(method, k, a1 * factor, mm.decay, temperature, src,
                       "public figure" if factor != 1.0 or wl in (None, "chat") else "public figure, other workload",
                       notes)
    label = "public figure" if factor != 1.0 or wl in (None, "chat") else "public figure, other workload"
    if wl not in (None, "chat") and factor == 1.0:
        notes.append(fsrc)
    b = mm.base
    src = (f"public figure {b.case_id} ({b.source_url}): AL {b.mean_length} at k={b.k} on {b.workload} -> "
           f"alpha_1 {mm.alpha1:.3f}; per-position decay {mm.decay:.3f} from {', '.join(mm.decay_sources) or 'none'}")
    if factor != 1.0:
        src += f"; x{factor:.3f} for {wl}: {fsrc}"
    return _finish(method, k, mm.alpha1 * factor, mm.decay, temperature, src, label, notes)


def _finish(method: str, k: int, a1: float, decay: float, temperature: float | None, src: str, label: str,
            notes: list[str]) -> Acceptance:
    tf = temperature_factor(temperature)
    if tf != 1.0:
        t = _data()["temperature"]
        src += (f"; x{tf:.3f} for temperature {temperature} (tau {t['tau_t1']} at T=1 vs {t['tau_t0']} at T=0, "
                f"{t['source_url']})")
        notes.append(t["note"])
    a1 = min(0.99, a1 * tf)
    rates = conditional_rates(a1, decay, k)
    al = length_from_conditional(rates)
    lo_a, hi_a = _alpha_range(a1, label)
    return Acceptance(method, k, a1, decay, rates, al, mean_length(lo_a, decay, k), mean_length(hi_a, decay, k),
                      geometric_alpha(al, k), src, label, notes)


# ----------------------------------------------------------------------------------------------------
# public draft heads
# ----------------------------------------------------------------------------------------------------
def known_draft_head(target_repo_id: str, method: str) -> tuple[str, str] | None:
    """``(head repo id, source URL)`` of a public EAGLE / EAGLE-3 head for ``target_repo_id``, or ``None``
    when none is catalogued (``calculator/data/spec_acceptance.json`` ``known_heads``; the first row for a
    target and method wins). MTP needs no head (the target's own MTP layers)."""
    key = (target_repo_id or "").strip().lower()
    for row in _data()["known_heads"]:
        if row["target"].lower() == key and row["method"] == method:
            return row["head"], row["source_url"]
    return None
