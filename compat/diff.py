"""Differences between two releases' extracted data (what changed in vLLM's backend rules)."""
from __future__ import annotations

import json

SUMMARY_KEYS = ("model_dtypes", "kv_cache_dtypes", "kernel_block_sizes", "head_sizes", "mla", "sparse", "sinks",
                "sliding_window", "mm_prefix", "attention_types", "compute_capability", "cudagraph_support")


def _value(declared: dict, key: str):
    item = declared.get(key) or {}
    return item.get("value")


def diff_releases(old: dict, new: dict) -> dict:
    """Compare two data files.

    Returns ``{"old", "new", "added": [names], "removed": [names], "changed": [{"backend", "field",
    "old", "new", "source"}], "platforms": [{"platform", "old", "new"}], "speculative": {"added",
    "removed"}, "cache_dtypes": {"added", "removed"}}``; ``source`` is the new release's file:line.
    """
    ob = {b["name"]: b for b in old["backends"] if b.get("declared")}
    nb = {b["name"]: b for b in new["backends"] if b.get("declared")}
    changed = []
    for name in sorted(set(ob) & set(nb)):
        for key in SUMMARY_KEYS:
            a, b = _value(ob[name]["declared"], key), _value(nb[name]["declared"], key)
            if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
                changed.append({"backend": name, "field": key, "old": a, "new": b,
                                "source": (nb[name]["declared"].get(key) or {}).get("source")})
        ra = sorted(r["reason"] for r in ob[name]["declared"].get("combination_reasons", []))
        rb = sorted(r["reason"] for r in nb[name]["declared"].get("combination_reasons", []))
        if ra != rb:
            changed.append({"backend": name, "field": "combination_reasons", "old": ra, "new": rb,
                            "source": nb[name].get("source")})
    plats = []
    for p in sorted(set(old["platforms"]) | set(new["platforms"])):
        a = old["platforms"].get(p, {}).get("backends")
        b = new["platforms"].get(p, {}).get("backends")
        if a != b:
            plats.append({"platform": p, "old": a, "new": b, "source": new["platforms"].get(p, {}).get("source")})
    so, sn = set(old["speculative"]["methods"]), set(new["speculative"]["methods"])
    co, cn = set(old["cache_dtypes"]["values"]), set(new["cache_dtypes"]["values"])
    return {
        "old": old["release"], "new": new["release"],
        "added": sorted(set(nb) - set(ob)), "removed": sorted(set(ob) - set(nb)),
        "changed": changed, "platforms": plats,
        "speculative": {"added": sorted(sn - so), "removed": sorted(so - sn)},
        "cache_dtypes": {"added": sorted(cn - co), "removed": sorted(co - cn)},
    }


def format_diff(d: dict) -> str:
    lines = [f"vLLM {d['old']} -> {d['new']}"]
    lines.append(f"backends added:   {', '.join(d['added']) or '-'}")
    lines.append(f"backends removed: {', '.join(d['removed']) or '-'}")
    lines.append(f"KV-cache dtypes added: {', '.join(d['cache_dtypes']['added']) or '-'}; "
                 f"removed: {', '.join(d['cache_dtypes']['removed']) or '-'}")
    lines.append(f"speculative methods added: {', '.join(d['speculative']['added']) or '-'}; "
                 f"removed: {', '.join(d['speculative']['removed']) or '-'}")
    for p in d["platforms"]:
        lines.append(f"platform {p['platform']} selector ({p['source']}): {p['old']} -> {p['new']}")
    for c in d["changed"]:
        lines.append(f"{c['backend']}.{c['field']}: {json.dumps(c['old'])} -> {json.dumps(c['new'])}  [{c['source']}]")
    return "\n".join(lines)
