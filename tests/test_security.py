"""Production settings (docs/deploy.md): the secret key, ``check --deploy``, allowed hosts, the
Content-Security-Policy, login throttling, and run pages that show a stranger with the link only what
they should see."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from validator.models import ValidationRun

ROOT = Path(__file__).resolve().parent.parent
DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def _django(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python with only ``env`` (plus PATH) as configuration."""
    base = {"PATH": os.environ.get("PATH", ""), "DJANGO_SETTINGS_MODULE": "llmcalc.settings",
            "VAR_DIR": str(tmp_path / "var"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _manage(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    code = f"import sys; from django.core.management import execute_from_command_line; execute_from_command_line(['manage.py', *{args!r}])"
    return _django(code, env, tmp_path)


def production_env() -> dict[str, str]:
    """The environment block of docs/deploy.md (```sh ... # production environment), as a dict."""
    text = DEPLOY_DOC.read_text()
    block = re.search(r"```sh\n# production environment\n(.*?)```", text, re.S)
    assert block, "docs/deploy.md has no '# production environment' block"
    env = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, value = line.removeprefix("export ").split("=", 1)
            env[key] = value.strip("'\"")
    return env


# -- the secret key -------------------------------------------------------------------------------------
def test_the_web_application_refuses_to_start_without_a_secret_key(tmp_path):
    r = _django("import llmcalc.wsgi", {"DEBUG": "0"}, tmp_path)
    assert r.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set and DEBUG is off" in r.stderr
    assert "SECRET_KEY_FILE" in r.stderr and "scripts/start" in r.stderr


def test_a_key_in_the_environment_or_in_var_secret_key_lets_it_start(tmp_path):
    ok = "import llmcalc.wsgi; from django.conf import settings; print(settings.SECRET_KEY)"
    r = _django(ok, {"DEBUG": "0", "SECRET_KEY": "k" * 50}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "k" * 50
    (tmp_path / "var").mkdir(exist_ok=True)
    (tmp_path / "var" / "secret_key").write_text("from-the-file-" + "x" * 40 + "\n")
    r = _django(ok, {"DEBUG": "0"}, tmp_path)  # scripts/start writes var/secret_key; settings read it
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "from-the-file-" + "x" * 40


def test_commands_without_a_key_get_a_random_one_never_a_known_one(tmp_path):
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    keys = {_django(code, {"DEBUG": "0"}, tmp_path).stdout.strip() for _ in range(2)}
    assert len(keys) == 2 and all(len(k) >= 50 for k in keys)


def test_scripts_start_writes_and_keeps_a_private_key(tmp_path):
    """The key-writing lines of scripts/start, run as they are in the script (no server is started)."""
    script = (ROOT / "scripts" / "start").read_text()
    lines = script[script.index("KEY_FILE="):script.index("fi\n", script.index("KEY_FILE=")) + 3]
    sh = f'set -euo pipefail\nPY={sys.executable}\nVAR_DIR={tmp_path}\n{lines}'
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "SECRET_KEY_FILE")}
    subprocess.run(["bash", "-c", sh], check=True, env=env, capture_output=True)
    key_file = tmp_path / "secret_key"
    first = key_file.read_text().strip()
    assert len(first) >= 60 and oct(key_file.stat().st_mode & 0o777) == "0o600"
    subprocess.run(["bash", "-c", sh], check=True, env=env, capture_output=True)
    assert key_file.read_text().strip() == first  # a second start keeps it (sessions survive restarts)


# -- check --deploy, hosts ------------------------------------------------------------------------------
def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    env = {**production_env(), "SECRET_KEY": "a-production-key-" + "z9" * 30}
    r = _manage(["check", "--deploy", "--fail-level", "WARNING"], env, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "System check identified no issues" in r.stdout


def test_check_deploy_names_what_is_missing_without_it(tmp_path):
    r = _manage(["check", "--deploy"], {"SECRET_KEY": "a-production-key-" + "z9" * 30}, tmp_path)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in r.stderr + r.stdout


def test_testserver_is_not_an_allowed_host_outside_tests(tmp_path):
    r = _django("import django; django.setup(); from django.conf import settings; print(settings.ALLOWED_HOSTS)",
                {}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "testserver" not in r.stdout and "localhost" in r.stdout


# -- Content-Security-Policy ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_scripts_or_eval(client):
    for url in ("/", "/accounts/login/"):
        csp = client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
        assert directives["script-src"] == "'self'", csp
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
        assert directives["default-src"] == "'self'"


def test_no_template_has_an_inline_script_or_a_javascript_url():
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text()
        assert "javascript:" not in text, path
        assert not re.search(r"\son[a-z]+=\"", text), path  # inline event handlers
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag or 'type="application/json"' in tag, (path, tag)


# -- login throttling -----------------------------------------------------------------------------------
@pytest.fixture
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.mark.django_db
def test_thirty_wrong_passwords_then_the_right_one_does_not_log_in(client, fast_passwords):
    User.objects.create_user("carol", password="the-right-password")
    login = reverse("login")
    for _ in range(30):
        client.post(login, {"username": "carol", "password": "wrong"})
    r = client.post(login, {"username": "carol", "password": "the-right-password"})
    assert r.status_code == 429 and b"Too many failed logins" in r.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_right_password_still_works_below_the_limit(client, settings, fast_passwords):
    User.objects.create_user("dave", password="the-right-password")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post(reverse("login"), {"username": "dave", "password": "wrong"}).status_code == 200
    r = client.post(reverse("login"), {"username": "dave", "password": "the-right-password"})
    assert r.status_code == 302 and client.session["_auth_user_id"]


# -- what a run page shows ------------------------------------------------------------------------------
@pytest.fixture
def private_run(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    site = sysconfig.get_paths()["purelib"]
    owner = User.objects.create_user("alice-the-submitter")
    model_dir = f"{settings.VAR_DIR}/tiny-models/llama"
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--port", "41234"]
    measured = {"phases": {"baseline": {"serve_argv": ["vllm", "serve", "tiny-random/llama"], "argv": argv,
                                        "aggregate": {"p50_ttft_ms": 5.0, "p95_ttft_ms": 6.0, "p99_ttft_ms": 7.0}}}}
    log = (f'File "{site}/vllm/engine/arg_utils.py", line 1700, in create_engine_config\n'
           f"ValueError: Cannot find the config file for awq in {model_dir} (see /srv/secret-mount/models/x/y)\n")
    run = ValidationRun.objects.create(
        configuration={"model_id": "tiny-random/llama"}, status="failed", created_by=owner,
        worker_host="gpu-node-17.internal.example", hardware={"platform": "cpu", "cpu_model": "Xeon", "cpu_count": 2,
                                                              "host": "gpu-node-17.internal.example"},
        measured=measured, log_tail=log, error=f"vLLM exited with code 1 during start-up: ValueError: in {model_dir}")
    return run, owner, [str(ROOT), str(settings.VAR_DIR), site, sys.prefix, "/srv/secret-mount"]


@pytest.mark.django_db
def test_a_stranger_sees_no_submitter_no_worker_host_no_local_path(client, private_run):
    run, owner, paths = private_run
    for url in (run.get_absolute_url(), reverse("validator:status", args=[run.pk])):
        page = client.get(url).content.decode()
        assert "alice-the-submitter" not in page and "by you" not in page
        assert "gpu-node-17" not in page
        for p in paths:
            assert p not in page, (url, p)
        # the meaning is kept: vLLM's reason, the file and the flags, with placeholders for the paths
        assert "Cannot find the config file for awq in &lt;var&gt;/tiny-models/llama" in page
        assert "&lt;site-packages&gt;/vllm/engine/arg_utils.py" in page
        assert "…/x/y" in page
    assert "--model &lt;var&gt;/tiny-models/llama" in client.get(run.get_absolute_url()).content.decode()


@pytest.mark.django_db
def test_the_submitter_is_told_it_is_their_run(client, private_run):
    run, owner, _ = private_run
    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "by you" in page and "alice-the-submitter" in page  # in the header's "logged in as", only
    assert page.count("alice-the-submitter") == 1


def test_the_throttled_address_is_the_client_behind_the_configured_proxies(rf, settings):
    from llmcalc.auth import client_ip

    spoofed = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4, 203.0.113.7"}
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_ip(rf.post("/accounts/login/", **spoofed)) == "10.0.0.2"  # no proxy: the header is ignored
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(rf.post("/accounts/login/", **spoofed)) == "203.0.113.7"  # the proxy's entry, not "1.2.3.4"
    assert client_ip(rf.post("/accounts/login/", REMOTE_ADDR="10.0.0.2")) == "10.0.0.2"
    settings.TRUSTED_PROXY_COUNT = 2
    assert client_ip(rf.post("/accounts/login/", **spoofed)) == "1.2.3.4"


@pytest.mark.django_db
def test_a_locked_out_address_does_not_lock_out_another_client_of_the_proxy(client, settings, fast_passwords):
    settings.TRUSTED_PROXY_COUNT = 1
    User.objects.create_user("frank", password="the-right-password")
    attacker = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "198.51.100.66"}
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(reverse("login"), {"username": "frank", "password": "wrong"}, **attacker)
    assert client.post(reverse("login"), {"username": "frank", "password": "the-right-password"},
                       **attacker).status_code == 429
    r = client.post(reverse("login"), {"username": "frank", "password": "the-right-password"},
                    REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="192.0.2.10")
    assert r.status_code == 302


# -- a failed CSRF check (settings.CSRF_FAILURE_VIEW) ----------------------------------------------------------------
def _csrf_client():
    from django.test import Client

    return Client(enforce_csrf_checks=True)


@pytest.mark.django_db
def test_a_post_to_the_page_without_a_csrf_token_says_what_to_do():
    """A form posted to / without its token: still a 403 (the check stays on), now the site's page saying which check
    failed and what to do, instead of Django's "CSRF verification failed. Request aborted." page."""
    r = _csrf_client().post("/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100", {"model": "x"})
    assert r.status_code == 403 and r["Content-Type"].startswith("text/html")
    html = r.content.decode()
    assert "CSRF verification failed" not in html and 'data-status="403"' in html
    assert "POST / was refused: it carries no valid CSRF token (CSRF cookie not set)" in html
    assert "reload that page (with cookies on)" in html and "/api/estimate?model=" in html
    # the calculator's parameters in the address are kept, one GET away
    assert 'id="kept-link"' in html and "gpu=H100" in html


@pytest.mark.django_db
@pytest.mark.parametrize("headers", [{"HTTP_ACCEPT": "application/json"}, {"content_type": "application/json"}])
def test_a_json_client_gets_the_refusal_as_json(headers):
    """A client that asks for JSON (Accept, or a JSON body) gets {"error": ...} with the same 403."""
    r = _csrf_client().post("/", **({"data": "{}"} if "content_type" in headers else {}), **headers)
    assert r.status_code == 403 and r["Content-Type"] == "application/json"
    assert r.json()["error"].startswith("POST / was refused: it carries no valid CSRF token")


@pytest.mark.django_db
def test_the_csrf_check_stays_on_and_a_valid_token_passes_it():
    """With the page's token the same POST passes the check and reaches the page, which answers GET only (405); without
    it, 403: the protection is Django's, unchanged. The read-only API is still exempt (its JSON 405)."""
    client = _csrf_client()
    client.get("/")  # the page sets the CSRF cookie its forms post with
    token = client.cookies["csrftoken"].value
    assert client.post("/", {"csrfmiddlewaretoken": token}).status_code == 405
    assert client.post("/", {"csrfmiddlewaretoken": "x" * 32}).status_code == 403
    api = _csrf_client().post("/api/estimate?model=meta-llama/Llama-3.1-8B-Instruct")
    assert api.status_code == 405 and api.json()["error"].startswith("method POST not allowed")
