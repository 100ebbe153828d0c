"""Settings for the LLM serving calculator.

One module driven by the environment, with working defaults: on a fresh machine the site runs on
SQLite in ``var/`` with the database task backend, so ``runserver`` plus ``db_worker`` need no
configuration. ``DATABASE_URL``-style switching is kept to the two variables below.
"""
from __future__ import annotations

import os
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


SECRET_KEY = os.getenv("SECRET_KEY", "dev-only-insecure-key-change-me-in-production")
DEBUG = envbool("DEBUG", "0")
ALLOWED_HOSTS = [h for h in os.getenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.getenv("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
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

VAR_DIR = Path(os.getenv("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite database, tiny models, run logs

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
