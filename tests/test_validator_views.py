"""Run pages: who may start a run, the per-user limit, bad input, polling until terminal."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from validator.models import ValidationRun

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _var(settings, tmp_path):
    from validator import capabilities

    settings.VAR_DIR = tmp_path
    capabilities.record(capabilities.describe("test-cpu-worker"))  # this machine as the live worker


@pytest.fixture
def user():
    u = User.objects.create_user("alice", password="pw-alice-123")
    u.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    return User.objects.get(pk=u.pk)


PARAMS = {"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024", "concurrency": "4"}


def test_it_requires_login(client):
    r = client.post(reverse("validator:new"), PARAMS)
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    assert ValidationRun.objects.count() == 0


def test_it_requires_the_permission(client):
    client.force_login(User.objects.create_user("bob"))
    assert client.post(reverse("validator:new"), PARAMS).status_code == 403
    assert ValidationRun.objects.count() == 0


def test_it_refuses_get(client, user):
    client.force_login(user)
    assert client.get(reverse("validator:new")).status_code == 405


def test_it_creates_a_run_and_redirects_to_its_page(client, user, django_capture_on_commit_callbacks):
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("validator:new"), PARAMS)
    run = ValidationRun.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/runs/{run.pk}/"
    assert run.created_by == user and run.status == "queued" and run.task_result_id
    assert run.configuration["params"]["max_model_len"] == "1024"
    page = client.get(r["Location"])
    assert page.status_code == 200
    assert b'id="run-status"' in page.content
    assert b'hx-trigger="load delay:500ms, every 2s"' in page.content
    status = client.get(reverse("validator:status", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert status.status_code == 200 and b"hx-get" in status.content


def test_the_status_view_stops_polling_once_terminal(client, user):
    run = ValidationRun.submit(PARAMS, user)
    run.cancel("changed my mind")
    r = client.get(reverse("validator:status", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert r.status_code == 286
    assert b"hx-get" not in r.content and b"changed my mind" in r.content


@pytest.mark.parametrize("bad,field", [({"model": "nobody/nothing"}, b"model"),
                                       ({"max_model_len": "lots"}, b"max_model_len"),
                                       ({"speculative_config": "{oops"}, b"speculative_config")])
def test_bad_input_is_a_400_with_the_reason(client, user, bad, field):
    client.force_login(user)
    r = client.post(reverse("validator:new"), {**PARAMS, **bad})
    assert r.status_code == 400 and field in r.content
    assert ValidationRun.objects.count() == 0


def test_it_limits_active_runs_per_user(client, user, settings):
    settings.VALIDATOR_MAX_ACTIVE_RUNS_PER_USER = 1
    client.force_login(user)
    assert client.post(reverse("validator:new"), PARAMS).status_code == 302
    r = client.post(reverse("validator:new"), PARAMS)
    assert r.status_code == 429 and b"already have 1" in r.content
    ValidationRun.objects.get().cancel()
    assert client.post(reverse("validator:new"), PARAMS).status_code == 302


def test_unknown_run_is_404(client):
    assert client.get("/runs/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_the_validate_button_posts_the_permalink_parameters(rf, user):
    from django.template.loader import render_to_string

    request = rf.get("/", {"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024"})
    request.user = user
    html = render_to_string("validator/_validate_button.html", {"perms": _perms(user), "user": user}, request)
    assert 'action="/runs/new"' in html and 'name="max_model_len" value="1024"' in html
    assert "csrfmiddlewaretoken" in html
    nobody = User.objects.create_user("carol")
    html = render_to_string("validator/_validate_button.html", {"perms": _perms(nobody), "user": nobody}, request)
    assert "/runs/new" not in html and "validator.add_validationrun" in html


def _perms(user):
    from django.contrib.auth.context_processors import PermWrapper

    return PermWrapper(user)


def test_the_creator_can_cancel_a_run_and_others_cannot(client, user):
    run = ValidationRun.submit(PARAMS, user)
    client.force_login(User.objects.create_user("mallory"))
    assert client.post(reverse("validator:cancel", args=[run.pk])).status_code == 403
    client.force_login(user)
    assert b"Cancel run" in client.get(run.get_absolute_url()).content
    r = client.post(reverse("validator:cancel", args=[run.pk]))
    assert r.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled" and run.error == "cancelled by its submitter"


def test_admin_lists_and_shows_runs(client, user):
    run = ValidationRun.submit(PARAMS, user)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-root-123"))
    r = client.get("/admin/validator/validationrun/")
    assert r.status_code == 200 and b"tiny-random/llama" in r.content
    assert client.get(f"/admin/validator/validationrun/{run.pk}/change/").status_code == 200
    r = client.post("/admin/validator/validationrun/", {"action": "cancel_runs", "_selected_action": [str(run.pk)]})
    assert r.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled" and run.error == "cancelled by an administrator"  # public page: no user names


def _done_run(tok_a, tok_b, verdict="keep"):
    """A finished run whose measured dict has the shape validator.bench writes (figures made up here)."""
    from validator import stats

    pairs = [({"output_throughput": a, "median_ttft_ms": 50.0, "p95_e2el_ms": 300.0},
              {"output_throughput": b, "median_ttft_ms": 50.0, "p95_e2el_ms": 300.0}) for a, b in zip(tok_a, tok_b)]
    v = stats.decide(pairs, {"acceptance_rate": 0.6, "mean_acceptance_length": 2.8}, 2**30, 64 * 2**30)
    assert v["verdict"] == verdict
    run = ValidationRun.objects.create(
        configuration={"model_id": "trained-pair/llama-target", "run_model": "trained-pair/llama-target",
                       "platform": "cpu", "params": {"model": "trained-pair/llama-target", "validation_workload": "code"},
                       "profile": {"repeats": len(tok_a)}},
        status="done",
        measured={"verdict": v, "workload": "code", "acceptance": {"acceptance_rate": 0.6, "mean_acceptance_length": 2.8},
                  "comparison": [{"field": "kv_cache_tokens", "unit": "tokens", "predicted": 100.0, "measured": 200.0,
                                  "error": -100.0, "error_pct": -50.0, "note": ""}]})
    return run


def test_the_run_page_states_the_verdict_first_and_colours_the_misses(client):
    run = _done_run([100, 102, 98, 101, 99], [150, 151, 149, 152, 150])
    html = client.get(run.get_absolute_url()).content.decode()
    assert html.index('id="verdict"') < html.index('data-field="kv_cache_tokens"')
    assert "Verdict: KEEP" in html and "Keep speculative decoding: output tok/s +" in html
    assert 'data-field="kv_cache_tokens" class="err-bad"' in html  # a -50 % miss is flagged


def test_two_runs_compare_side_by_side(client):
    a = _done_run([100, 102, 98, 101, 99], [150, 151, 149, 152, 150])
    b = _done_run([100, 102, 98, 101, 99], [60, 61, 59, 62, 60], verdict="disable")
    r = client.get(reverse("validator:compare") + f"?a={a.pk}&b={b.pk}")
    html = r.content.decode()
    assert r.status_code == 200 and "keep" in html and "disable" in html
    assert client.get(reverse("validator:compare") + "?a=x&b=y").status_code == 400


def test_presets_page_offers_the_trained_pair_to_a_cpu_worker(client, user):
    client.force_login(user)
    html = client.get(reverse("validator:presets")).content.decode()
    assert 'data-preset="repetitive-ngram-3"' in html and html.count(">Validate</button>") >= 6
