"""Which answer does each model get on each vLLM release: a verdict, or an input error?

    python benchmarks/verdict_or_error.py [--out run.json] [--compare before.json] [--releases 0.15.1,0.19.0]

For every config.json of the shared set (``/work/shared/data/model_configs``, read as ``estimate --config``
reads a file) and of the offline catalog (``calculator/data/model_configs``, asked by Hub id as ``estimate
--model`` asks), and every vLLM release with compatibility data (``compat/data/vllm-*.json``), it runs the
request pipeline (:func:`calculator.plan.make_plan`: H100, TP 1, the model's own context, no speed) and records
the answer: the verdict's status (``works``, ``does_not_fit``, ``does_not_start``, ``depends``; a
``does_not_start`` whose cause is the release's model registry is ``does_not_start:registry``, with the release
the verdict offers) or ``input_error`` with the field and the first words of the message.

It prints the count of each kind of answer, every input error that names the release (``vllm_version``) or the
architecture, and, with ``--compare``, every (model, release) whose kind of answer changed. Nothing is fitted:
this is a map of which path each architecture takes, not an accuracy measure.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
SHARED = Path("/work/shared/data/model_configs")

from benchmarks._answers import print_changes, write_answers  # noqa: E402


def _models() -> list[tuple[str, dict]]:
    """``(label, how to ask)``: shared files as a local config, catalog entries by Hub id."""
    from calculator.metadata.catalog import catalog_models

    out = []
    for path in sorted(SHARED.glob("*.json")):
        local = {"config": json.loads(path.read_text()), "source": f"config.json file {path}", "quant_config": None}
        out.append((f"shared:{path.stem}", local))
    for repo in sorted(catalog_models()):
        out.append((f"catalog:{repo}", {"model": repo}))
    return out


def answer(how: dict, release: str) -> dict:
    """The kind of answer for one model on one release (see the module docstring)."""
    from calculator.plan import make_plan
    from calculator.request import InputError, parse_request

    model = how.get("model", "local/config")
    try:
        request = parse_request({"model": model, "gpu": "H100", "vllm_version": release})
        local = None if "model" in how else how
        plan = make_plan(request, local, with_speed=False, with_suggestions=False)
    except InputError as exc:
        tail = exc.message.split("; and vLLM ", 1)
        return {"kind": "input_error", "field": exc.field, "message": exc.message[:160],
                "note": ("vLLM " + tail[1][:200]) if len(tail) > 1 else ""}
    v = plan.verdict
    arch = getattr(plan.compat, "architecture", None)
    kind = v.status
    out: dict = {"kind": kind}
    if v.status == "does_not_start" and arch is not None and arch.ok is False:
        out = {"kind": "does_not_start:registry", "first_release": arch.first_release, "headline": v.headline[:160],
               "weights_gib": plan.memory.weights_gib}
    elif v.status == "depends" and arch is not None and arch.ok is None:
        out = {"kind": "depends:transformers_backend", "first_release": arch.first_release}
    return out


def offered(how: dict, release: str) -> list[str]:
    """The suggestions of the full answer (the registry cases only: it runs every candidate)."""
    from calculator.plan import make_plan
    from calculator.request import parse_request

    request = parse_request({"model": how.get("model", "local/config"), "gpu": "H100", "vllm_version": release})
    plan = make_plan(request, None if "model" in how else how, with_speed=False)
    return [s.label for s in plan.verdict.suggestions]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write every answer to this JSON file")
    ap.add_argument("--compare", help="a JSON file an earlier run wrote: print what changed")
    ap.add_argument("--releases", help="comma-separated releases (default: every release with compat data)")
    ap.add_argument("--models", help="only labels containing this text")
    ap.add_argument("--suggestions", action="store_true",
                    help="also run the suggestion search for each registry refusal (slow)")
    args = ap.parse_args()
    import django

    django.setup()
    from django.core.cache import cache

    from calculator.request import covered_releases

    releases = args.releases.split(",") if args.releases else list(covered_releases())
    models = [(label, how) for label, how in _models() if not args.models or args.models in label]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    t0 = time.time()
    for label, how in models:
        for rel in releases:
            results[label][rel] = answer(how, rel)
            if args.suggestions and results[label][rel]["kind"] == "does_not_start:registry":
                results[label][rel]["suggestions"] = offered(how, rel)
        cache.clear()
    took = time.time() - t0

    kinds = Counter(a["kind"] for per in results.values() for a in per.values())
    print(f"{len(models)} models x {len(releases)} releases ({releases[0]} .. {releases[-1]}) = "
          f"{sum(kinds.values())} answers in {took:.0f} s")
    for kind, n in kinds.most_common():
        print(f"  {kind:<30} {n:5d}")
    fields = Counter((a["field"], a["message"][:70]) for per in results.values() for a in per.values()
                     if a["kind"] == "input_error")
    noted = sum(1 for per in results.values() for a in per.values()
                if a["kind"] == "input_error" and "model registry stops it" in a.get("note", ""))
    print(f"  (input errors that also give the release registry's refusal: {noted})")
    print("\ninput errors by field and first words:")
    for (field, msg), n in fields.most_common():
        print(f"  {n:5d}  {field}: {msg}")
    print("\nrelease / architecture answers (model: releases -> kind):")
    for label, per in results.items():
        spans: dict[str, list[str]] = defaultdict(list)
        for rel, a in per.items():
            if a["kind"] in ("does_not_start:registry", "depends:transformers_backend") or (
                    a["kind"] == "input_error" and (a["field"] == "vllm_version" or "architecture" in a["message"]
                                                    or "model registry stops it" in a.get("note", ""))):
                key = a["kind"] + (f" ({a['field']}: {a['message'][:40]}...)" + (", with the registry's refusal"
                                                                                  if a.get("note") else "")
                                   if a["kind"] == "input_error" else f", offers {a.get('first_release')}")
                if a.get("suggestions") is not None:
                    key += f", suggestions: {a['suggestions'][:2]}"
                spans[key].append(rel)
        for key, rels in spans.items():
            print(f"  {label}: {rels[0]}..{rels[-1]} ({len(rels)}) -> {key}")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        changed = Counter()
        print("\nchanged since", args.compare)
        for label, per in results.items():
            for rel, a in per.items():
                b = before.get(label, {}).get(rel)
                if b is None or b["kind"] == a["kind"]:
                    continue
                changed[(b["kind"], a["kind"])] += 1
                now = f" ({a['field']}: {a['message'][:90]})" if a["kind"] == "input_error" else ""
                print(f"  {label} {rel}: {b['kind']}" + (f" ({b['field']})" if b["kind"] == "input_error" else "")
                      + f" -> {a['kind']}{now}")
        print_changes(changed)
    write_answers(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
