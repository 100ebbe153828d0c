"""The results page offers validation according to the user's rights; the login page exists."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

QUERY = "/?model=tiny-random/llama&gpu=CPU&max_model_len=1024&vllm_version=0.32.0"
GPU_QUERY = "/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&max_model_len=8192&vllm_version=0.32.0"


@pytest.fixture(autouse=True)
def offline(offline_hub, settings, tmp_path):
    """Offline, and this machine (CPU only, vLLM's CPU build) recorded as the one live worker."""
    from validator import capabilities

    settings.VAR_DIR = tmp_path
    capabilities.record(capabilities.describe("test-cpu-worker"))


@pytest.mark.django_db
def test_a_gpu_configuration_on_a_cpu_only_site_is_not_offered_and_says_what_is_missing(client):
    alice = User.objects.create_user("alice", password="pw-123456")
    alice.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.login(username="alice", password="pw-123456")
    html = client.get(GPU_QUERY, follow=True).content.decode()
    assert "Validate with a real vLLM run" not in html
    assert "Validation is not offered" in html and "needs 1x NVIDIA H100" in html and "has no GPU" in html
    # and a post that bypasses the page is refused up front, nothing queued
    from validator.models import ValidationRun

    r = client.post("/runs/new", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100"})
    assert r.status_code == 503 and b"needs 1x NVIDIA H100" in r.content
    assert ValidationRun.objects.count() == 0


@pytest.mark.django_db
def test_without_a_live_worker_nothing_is_offered(client, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "empty"
    html = client.get(QUERY, follow=True).content.decode()
    assert "no validation worker is running" in html and "Log in</a> to validate" not in html


@pytest.mark.django_db
def test_anonymous_user_gets_a_login_link(client):
    r = client.get(QUERY, follow=True)
    assert r.status_code == 200
    assert b"Log in</a> to validate" in r.content


@pytest.mark.django_db
def test_login_page_renders(client):
    r = client.get("/accounts/login/?next=/")
    assert r.status_code == 200 and b'name="username"' in r.content


@pytest.mark.django_db
def test_user_without_permission_is_told_which_one(client):
    User.objects.create_user("bob", password="pw-123456")
    client.login(username="bob", password="pw-123456")
    r = client.get(QUERY, follow=True)
    assert b"validator.add_validationrun" in r.content and b"Validate with a real vLLM run" not in r.content


@pytest.mark.django_db
def test_user_with_permission_gets_the_button_posting_to_runs_new(client):
    alice = User.objects.create_user("alice", password="pw-123456")
    alice.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.login(username="alice", password="pw-123456")
    r = client.get(QUERY, follow=True)
    assert b'action="/runs/new"' in r.content and b"Validate with a real vLLM run" in r.content


@pytest.mark.django_db
def test_tiny_model_from_the_calculator_page_to_a_queued_run(client, settings, tmp_path):
    """The page path a user takes: results for tiny-random/llama on the CPU, the validate form's hidden
    fields, posted to /runs/new, give a saved run of that model (the worker then runs it; the end-to-end
    test covers the worker)."""
    import re

    from validator.models import ValidationRun

    alice = User.objects.create_user("alice", password="pw-123456")
    alice.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.login(username="alice", password="pw-123456")
    page = client.get("/?model=tiny-random/llama&gpu=CPU&max_model_len=1024&vllm_version=0.32.0", follow=True)
    html = page.content.decode()
    assert page.status_code == 200 and "Validate with a real vLLM run" in html
    form = html[html.index('class="validate"'):]
    form = form[:form.index("</form>")]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    assert fields["model"] == "tiny-random/llama" and fields["max_model_len"] == "1024"
    r = client.post("/runs/new", fields)
    assert r.status_code == 302
    run = ValidationRun.objects.get()
    assert r["Location"].endswith(f"/runs/{run.pk}/")
    assert run.configuration["engine_input"]["hf_config"]["architectures"] == ["LlamaForCausalLM"]


@pytest.mark.django_db
def test_a_llamacpp_answer_offers_a_llamacpp_run_when_the_worker_has_its_server(client):
    """This machine's worker lists llama.cpp when llama-cpp-python's server imports (validator.capabilities); the
    llama.cpp answer then offers its own run, named for its runtime; an SGLang answer says what its run needs."""
    from validator import capabilities

    alice = User.objects.create_user("carol", password="pw-123456")
    alice.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.login(username="carol", password="pw-123456")
    html = client.get("/?model=tiny-random/llama&gpu=CPU&max_model_len=1024&runtime=llama.cpp", follow=True).content.decode()
    if "llama.cpp" in capabilities.describe("probe")["runtimes"]:
        assert "Validate with a real llama.cpp run" in html
    else:
        assert "Validation is not offered" in html and "llama.cpp runs are not available on this site" in html
    sg = client.get("/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&runtime=sglang", follow=True).content.decode()
    # no worker with SGLang and an H100 here: the answer names what an SGLang run needs
    assert "Validation is not offered" in sg and "with SGLang installed; SGLang runs are not available on a site " \
        "without such a GPU worker" in sg and "NVIDIA H100" in sg
