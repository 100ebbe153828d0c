"""Which (model, SGLang release) answers the config check changes: can the release load the config.json?

    python benchmarks/sglang_config_sweep.py [--releases 0.5.9,0.5.10.post1] [--models GLM] [--out run.json]

For every config.json of the shared set (``/work/shared/data/model_configs``, asked as ``estimate --config`` asks),
of the offline catalog (``calculator/data/model_configs`` and its aliases, asked by Hub id) and the built-in models
(``calculator/data/builtin``), and every covered SGLang release, it runs the request pipeline
(:func:`calculator.plan.make_plan`: H200, TP 1, or TP 8 when TP 1 does not fit, the model's own context, no speed)
twice: with the check of :func:`calculator.runtimes.sglang.config_types.check_config` (does the release, with the
transformers its wheel pins and the config classes SGLang registers, know the config's ``model_type``) and without it
(the answer before the check existed). It prints every (model, release) whose answer changed, with the check's
verdict (``depends`` on a newer transformers or ``--trust-remote-code``; ``does_not_start`` when no way loads it) and
the release it offers, then the counts. Nothing is fitted: this is a map of the rule's reach.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
SHARED = Path("/work/shared/data/model_configs")

from benchmarks._answers import print_changes, write_answers  # noqa: E402


def _models() -> list[tuple[str, dict, dict]]:
    """``(label, how to ask, config)``: shared files as a local config, catalog entries and built-ins by id."""
    from calculator.metadata.builtin import BUILTIN_MODELS, builtin_config
    from calculator.metadata import catalog

    out = []
    for path in sorted(SHARED.glob("*.json")):
        cfg = json.loads(path.read_text())
        out.append((f"shared:{path.stem}", {"config": cfg, "source": f"config.json file {path}",
                                            "quant_config": None}, cfg))
    for repo in sorted(catalog.catalog_models()):
        cfg = json.loads((catalog.CATALOG_DIR / catalog._find(repo)[0]).read_text())
        out.append((f"catalog:{repo}", {"model": repo}, cfg))
    for repo in BUILTIN_MODELS:
        out.append((f"builtin:{repo}", {"model": repo}, builtin_config(repo)))
    return out


def answer(how: dict, release: str, *, suggestions: bool = False) -> dict:
    """The verdict (or input error) of one model on one release: H200, TP 1, else TP 8 when TP 1 does not fit."""
    from calculator.plan import make_plan
    from calculator.request import InputError, parse_request

    model = how.get("model", "local/config")
    local = None if "model" in how else how
    out: dict = {}
    for tp in ("1", "8"):
        try:
            request = parse_request({"model": model, "gpu": "H200", "runtime": "sglang", "sglang_version": release,
                                     "tensor_parallel_size": tp})
            plan = make_plan(request, local, with_speed=False, with_suggestions=suggestions)
        except InputError as exc:
            out = {"kind": "input_error", "field": exc.field, "message": exc.message[:120], "tp": tp}
            if tp == "1":
                continue
            return out
        v = plan.verdict
        out = {"kind": v.status, "tp": tp, "condition": (v.condition or "")[:200],
               "suggestions": [s.label for s in v.suggestions]}
        if v.status != "does_not_fit":
            return out
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", help="comma-separated releases (default: every covered one)")
    ap.add_argument("--models", help="only labels containing this text")
    ap.add_argument("--out", help="write every answer to this JSON file")
    args = ap.parse_args()
    import django

    django.setup()
    from django.core.cache import cache

    from calculator.runtimes.sglang import runtime as sg_runtime
    from calculator.runtimes.sglang.config_types import check_config
    from calculator.runtimes.sglang.releases import COVERED

    releases = args.releases.split(",") if args.releases else list(COVERED)
    models = [m for m in _models() if not args.models or args.models in m[0]]
    results: dict[str, dict[str, dict]] = {}
    t0 = time.time()
    flagged = 0
    for label, how, cfg in models:
        for rel in releases:
            check = check_config(rel, cfg)
            if check is None or check.loads:
                continue  # the check adds nothing: the answer is the one it was
            flagged += 1
            sg_runtime.check_config = lambda *_a, **_k: None
            try:
                before = answer(how, rel)
            finally:
                sg_runtime.check_config = check_config
            after = answer(how, rel, suggestions=True)
            results.setdefault(label, {})[rel] = {"model_type": cfg.get("model_type"), "before": before,
                                                  "after": after, "remote_code": bool(
                                                      (cfg.get("auto_map") or {}).get("AutoConfig"))}
            cache.clear()
    took = time.time() - t0
    pairs = len(models) * len(releases)
    print(f"{len(models)} models x {len(releases)} releases = {pairs} pairs; the config check flags {flagged} "
          f"({took:.0f} s)")
    changed = Counter()
    print("\n(model, release): model_type, answer without the check -> with it [offered]")
    for label, per in results.items():
        for rel, r in per.items():
            b, a = r["before"], r["after"]
            if b["kind"] == a["kind"] and b.get("condition") == a.get("condition"):
                continue
            changed[(b["kind"], a["kind"])] += 1
            how = "--trust-remote-code" if r["remote_code"] else "newer transformers"
            if a["kind"] == "depends":
                how = a["condition"].split(":", 1)[0][:110]
            print(f"  {label} {rel}: {r['model_type']}, {b['kind']} -> {a['kind']} ({how})"
                  + (f" [{'; '.join(a['suggestions'])}]" if a.get("suggestions") else ""))
    print("\nflagged but the answer did not change (refused or not fitting before the check):")
    for label, per in results.items():
        for rel, r in per.items():
            b, a = r["before"], r["after"]
            if b["kind"] == a["kind"] and b.get("condition") == a.get("condition"):
                why = b.get("field", "") + ": " + b.get("message", "")[:80] if b["kind"] == "input_error" else b["kind"]
                print(f"  {label} {rel}: {r['model_type']} ({why})")
    print_changes(changed)
    write_answers(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
