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
