"""The results page offers validation according to the user's rights; the login page exists."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

QUERY = "/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&max_model_len=8192&vllm_version=0.32.0"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.django_db
def test_anonymous_user_gets_a_login_link(client):
    r = client.get(QUERY)
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
    r = client.get(QUERY)
    assert b"validator.add_validationrun" in r.content and b"Validate with a real vLLM run" not in r.content


@pytest.mark.django_db
def test_user_with_permission_gets_the_button_posting_to_runs_new(client):
    alice = User.objects.create_user("alice", password="pw-123456")
    alice.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.login(username="alice", password="pw-123456")
    r = client.get(QUERY)
    assert b'action="/runs/new"' in r.content and b"Validate with a real vLLM run" in r.content


@pytest.mark.django_db
def test_tiny_model_from_the_calculator_page_to_a_queued_run(client, settings, tmp_path):
    """The page path a user takes: results for tiny-random/llama on the CPU, the validate form's hidden
    fields, posted to /runs/new, give a saved run of that model (the worker then runs it; the end-to-end
    test covers the worker)."""
    import re

    from validator.models import ValidationRun

    settings.VAR_DIR = tmp_path
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
