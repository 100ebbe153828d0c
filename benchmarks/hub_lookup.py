"""How many HTTP requests and how long a model-metadata lookup takes, cold and cached.

Starts the local Hub server of the tests (tests/hub_server.py) with two repos built from real configs
(../shared/data/model_configs): a single-file checkpoint and a checkpoint in 4 safetensors shards. Uses a
throw-away SQLite database. Prints one table row per kind of lookup:

    python benchmarks/hub_lookup.py [--repeat 5]

Times are wall-clock milliseconds, the median over ``--repeat`` runs; requests exclude huggingface_hub's
once-per-process telemetry fetch (see tests/hub_server.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def checkpoint_files(config_name: str, shards: int) -> dict[str, bytes]:
    import torch
    from safetensors.torch import save

    from tests.test_hub import llama_tensors

    config = (ROOT.parent / "shared" / "data" / "model_configs" / config_name)
    if not config.exists():
        config = ROOT / "calculator" / "data" / "model_configs" / config_name
    files = {"config.json": config.read_bytes()}
    if shards == 1:
        files["model.safetensors"] = save(llama_tensors(torch.bfloat16))
        return files
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = llama_tensors(torch.bfloat16, layers=[i], head=(i == shards - 1))
        files[name] = save(tensors)
        weight_map.update({k: name for k in tensors})
    files["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="hub-bench-")
    os.environ["DB_NAME"] = os.path.join(tmp, "db.sqlite3")
    os.environ["HF_HOME"] = os.path.join(tmp, "hf")
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    from calculator import metadata
    from calculator.models import HubRevision, ModelMetadataCache
    from tests.hub_server import FakeHub

    call_command("migrate", verbosity=0)
    rows = []
    with FakeHub() as hub:
        os.environ["HF_ENDPOINT"] = hub.url
        repos = {
            "bench/llama-1-file": checkpoint_files("meta-llama__Llama-3.1-8B.json", 1),
            "bench/llama-4-shards": checkpoint_files("meta-llama__Llama-3.1-8B.json", 4),
        }
        for repo_id, files in repos.items():
            hub.add_repo(repo_id, files)
        metadata.load_model("bench/llama-1-file", count_params=False)  # warm imports and the HTTP client
        ModelMetadataCache.objects.all().delete()
        HubRevision.objects.all().delete()

        def measure(label, repo_id, prepare, revision=None):
            times, counts = [], []
            for _ in range(args.repeat):
                prepare(repo_id)
                before = len(hub.requests)
                start = time.perf_counter()
                meta = metadata.load_model(repo_id, revision, count_params=False)
                times.append((time.perf_counter() - start) * 1000)
                counts.append(len(hub.requests) - before)
            rows.append((label, repo_id, statistics.median(counts), statistics.median(times), meta.source))

        def cold(repo_id):
            ModelMetadataCache.objects.filter(repo_id=repo_id).delete()
            HubRevision.objects.filter(repo_id=repo_id).delete()

        def nothing(repo_id):
            pass

        def expire(repo_id):
            HubRevision.objects.filter(repo_id=repo_id).update(resolved_at=timezone.now() - timedelta(days=1))

        for repo_id in repos:
            measure("cold (nothing cached)", repo_id, cold)
            measure("cached branch (within TTL)", repo_id, nothing)
            measure("branch past TTL, same sha", repo_id, expire)
            sha = ModelMetadataCache.objects.get(repo_id=repo_id).sha
            measure("pinned sha (cached)", repo_id, nothing, revision=sha)
        os.environ["HF_HUB_OFFLINE"] = "1"
        measure("offline catalog", "meta-llama/Llama-3.1-8B", nothing)

    print(f"{'lookup':<28} {'repo':<26} {'HTTP requests':>13} {'median ms':>10}  source")
    for label, repo_id, count, ms, source in rows:
        print(f"{label:<28} {repo_id:<26} {count:>13g} {ms:>10.1f}  {source}")


if __name__ == "__main__":
    main()
