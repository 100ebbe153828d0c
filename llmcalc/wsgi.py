"""WSGI entry point (gunicorn ``llmcalc.wsgi``). Refuses to start with DEBUG off and no configured
``SECRET_KEY`` (see ``llmcalc.settings``: ``SECRET_KEY_MISSING``, ``SECRET_KEY_MESSAGE``)."""
import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
if getattr(settings, "SECRET_KEY_MISSING", False) and not settings.DEBUG:
    raise ImproperlyConfigured(settings.SECRET_KEY_MESSAGE)
application = get_wsgi_application()
