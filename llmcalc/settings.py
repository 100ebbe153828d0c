"""Settings for the LLM serving calculator.

One module driven by the environment, with working defaults: on a fresh machine the site runs on
SQLite in ``var/`` with the database task backend, so ``runserver`` plus ``db_worker`` need no
configuration. ``DATABASE_URL``-style switching is kept to the two variables below.
"""
from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    value = os.getenv(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (1/0, true/false), got {value!r}")


def envint(name: str, default: str) -> int:
    value = os.getenv(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {value!r}") from None


DEBUG = envbool("DEBUG", "0")
VAR_DIR = Path(os.getenv("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite database, tiny models, run logs, secret key

# SECRET_KEY: the environment, else the file SECRET_KEY_FILE (default var/secret_key, which scripts/start
# writes on first start). Without either and with DEBUG off, the web application refuses to start
# (llmcalc/wsgi.py raises ImproperlyConfigured with SECRET_KEY_MESSAGE); other processes (management commands, the task worker,
# tests) get a random key for this process only, so no known key ever signs anything.
SECRET_KEY_FILE = Path(os.getenv("SECRET_KEY_FILE", VAR_DIR / "secret_key"))


def _read_secret_key() -> str:
    key = os.getenv("SECRET_KEY", "").strip()
    if key:
        return key
    try:
        return SECRET_KEY_FILE.read_text().strip()
    except FileNotFoundError:
        return ""
    except OSError as e:
        raise ImproperlyConfigured(f"SECRET_KEY_FILE {SECRET_KEY_FILE}: cannot be read ({e})") from None


SECRET_KEY = _read_secret_key()
SECRET_KEY_MISSING = not SECRET_KEY
if SECRET_KEY_MISSING:
    SECRET_KEY = "django-insecure-dev-key-debug-only" if DEBUG else secrets.token_urlsafe(50)

SECRET_KEY_MESSAGE = (
    "SECRET_KEY is not set and DEBUG is off: the site will not start with a key anyone could know. "
    "Set the SECRET_KEY environment variable (e.g. from `python -c 'import secrets; "
    "print(secrets.token_urlsafe(50))'`), or SECRET_KEY_FILE to a file holding it, or run scripts/start, "
    f"which writes one to {SECRET_KEY_FILE} on first start. For local development only: DEBUG=1. "
    "See docs/deploy.md."
)


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


# Django's test set-up (pytest-django) adds "testserver" itself; it is never allowed otherwise.
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

# HTTPS (docs/deploy.md). HTTPS=1 turns on everything a site served only over TLS needs; each switch
# can be set on its own. SECURE_PROXY_SSL_HEADER=1 trusts X-Forwarded-Proto: https from the reverse
# proxy (only when the proxy sets/overwrites that header).
HTTPS = envbool("HTTPS", "0")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "1" if HTTPS else "0")
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "1" if HTTPS else "0")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "1" if HTTPS else "0")
# A failed CSRF check is a 403 in the site's words (JSON for a request that asks for JSON), not Django's page
CSRF_FAILURE_VIEW = "calculator.web.errors.csrf_failure"
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "31536000" if HTTPS else "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "0")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "0")
if envbool("SECURE_PROXY_SSL_HEADER", "0"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "csp",
    "axes",
    "django_tasks",
    "django_tasks_db",
    "calculator",
    "compat",
    "validator",
]

MIDDLEWARE = [
    "calculator.web.timing.ServerTimingMiddleware",  # Server-Timing: app;dur=<ms> (benchmarks/web_load.py)
    "django.middleware.security.SecurityMiddleware",
    "calculator.web.errors.LongUrlMiddleware",  # 414 page above 8190 characters (gunicorn lets them through)
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "llmcalc.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "llmcalc.wsgi.application"

if os.getenv("DB", "sqlite") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.getenv("DB_NAME", "llmcalc"),
            "USER": os.getenv("DB_USER", "postgres"),
            "PASSWORD": os.getenv("DB_PASSWORD", ""),
            "HOST": os.getenv("DB_HOST", "localhost"),
            "PORT": os.getenv("DB_PORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.getenv("DB_NAME", str(VAR_DIR / "db.sqlite3")),
            # The worker and the web process share the file: wait for a lock instead of failing.
            "OPTIONS": {"timeout": envint("SQLITE_TIMEOUT", "20"), "transaction_mode": "IMMEDIATE"},
        }
    }

TASKS = {
    "default": {
        "BACKEND": os.getenv("TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username from one
# address, that pair is locked out for AXES_COOLOFF_MINUTES, even with the right password. Behind a
# reverse proxy set TRUSTED_PROXY_COUNT (the number of proxies) so the client address is read from
# X-Forwarded-For (llmcalc.auth.client_ip); otherwise every client appears as the proxy's address.
AUTHENTICATION_BACKENDS = [
    "llmcalc.auth.AxesBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", "10")
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
TRUSTED_PROXY_COUNT = envint("TRUSTED_PROXY_COUNT", "0")
AXES_CLIENT_IP_CALLABLE = "llmcalc.auth.client_ip"

# Content-Security-Policy (django-csp). Every script is a file from this site (htmx from django-htmx,
# vendored Vega under static/vendor, static/js); no inline script, no eval. Inline styles stay allowed:
# the memory bar's segment widths are style attributes, and htmx and vega-embed insert <style> elements.
# Vega's expressions run through the vendored vega-interpreter (no `new Function`, see static/js).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.getenv("STATIC_ROOT", VAR_DIR / "staticfiles"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Hugging Face Hub access (calculator.metadata.hub). HF_ENDPOINT / HF_TOKEN / HF_HUB_OFFLINE are read by
# huggingface_hub itself; these are ours.
HUB_TIMEOUT_S = float(os.getenv("HUB_TIMEOUT_S", "10"))
HUB_BRANCH_TTL_S = envint("HUB_BRANCH_TTL_S", "3600")
# After a Hub timeout / connection failure, answer from the cache or catalog for this long before retrying.
HUB_RETRY_AFTER_S = envint("HUB_RETRY_AFTER_S", "60")

# Validation runs (validator/). The worker is `manage.py db_worker`; see README "Validation runs".
VALIDATOR_MAX_ACTIVE_RUNS_PER_USER = envint("VALIDATOR_MAX_ACTIVE_RUNS_PER_USER", "2")
VALIDATOR_RUN_TIMEOUT_S = envint("VALIDATOR_RUN_TIMEOUT_S", "900")  # wall clock; then the process group is killed
VALIDATOR_STARTUP_TIMEOUT_S = envint("VALIDATOR_STARTUP_TIMEOUT_S", "300")  # vLLM start-up until /health
VALIDATOR_BENCH_TIMEOUT_S = envint("VALIDATOR_BENCH_TIMEOUT_S", "600")
VALIDATOR_HEARTBEAT_S = envint("VALIDATOR_HEARTBEAT_S", "2")
VALIDATOR_STALE_AFTER_S = envint("VALIDATOR_STALE_AFTER_S", "120")  # no heartbeat this long: failed by the sweep
VALIDATOR_CPU_KVCACHE_GIB = envint("VALIDATOR_CPU_KVCACHE_GIB", "1")  # VLLM_CPU_KVCACHE_SPACE on the CPU build

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.getenv("LOG_LEVEL", "INFO")},
}
