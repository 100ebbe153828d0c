"""End to end on this machine's CPU: a logged-in user submits a llama.cpp validation through the web view, the real
worker (django-tasks-db's db_worker) starts ``python -m llama_cpp.server`` on a tiny GGUF, and the report holds the
logged buffers equal to the plan and the measured TPOT."""
from __future__ import annotations

from functools import partial

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse

from validator.models import ValidationRun

pytest.importorskip("vllm", reason="the worker extra (vLLM's serving benchmark) is not installed")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

run_worker = partial(call_command, "db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_llama_cpp_run_from_the_web_view_to_the_report(client):
    from validator import capabilities, llamacpp

    if llamacpp.server_available()[0] is None:
        pytest.skip(llamacpp.server_available()[1])
    capabilities.record(capabilities.describe("e2e-llamacpp-worker"))
    user = User.objects.create_user("alice")
    user.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.force_login(user)
    r = client.post(reverse("validator:new"), {"model": "tiny-random/llama", "runtime": "llama.cpp", "gpu": "CPU"})
    assert r.status_code == 302
    run = ValidationRun.objects.get()

    run_worker()

    run.refresh_from_db()
    assert run.status == ValidationRun.Status.DONE, (run.error, run.log_tail[-3000:])
    m = run.measured
    base = m["phases"]["baseline"]
    assert base["argv"][1:3] == ["-m", "llama_cpp.server"] and base["stopped"] in ("terminated", "killed", "gone")
    rows = {row["field"]: row for row in m["comparison"]}
    # by hand: 2 layers x 1024 cells x (2 KV heads x 32) x 2 bytes (f16) x K and V = 0.5 MiB
    assert rows["kv_cache_mib"]["measured"] == rows["kv_cache_mib"]["predicted"] == 0.5
    model_rows = [row for f, row in rows.items() if f.startswith("model_buffer_mib[")]
    assert model_rows and all(row["predicted"] == row["measured"] for row in model_rows), model_rows
    assert "within stated error" in rows["compute_buffer_mib[CPU]"]["note"]
    profile = run.configuration["profile"]
    agg = base["aggregate"]
    assert agg["completed"] == profile["num_prompts"] and agg["failed"] == 0
    assert agg["total_output_tokens"] == profile["num_prompts"] * profile["output_len"]
    # TPOT is measured, or, where the host was too busy to stream the tiny model's tokens one by one (each request's
    # tokens reached the client in one burst: bench.per_token_measurable), said not measurable rather than a number
    tpot = rows["tpot_ms"]
    assert (tpot["measured"] is not None and tpot["measured"] > 0) or \
        (tpot["measured"] is None and tpot["note"].startswith("not measurable: the server sent each request's tokens "
                                                              "in one burst"))
    page = client.get(reverse("validator:detail", args=[run.pk])).content.decode()
    assert "kv_cache_mib" in page and "llama.cpp" in page
