"""Login throttling: django-axes' backend, for authentication that comes with a request.

``AxesStandaloneBackend`` refuses ``authenticate()`` calls without a request (it cannot tell who is
asking). Only the web login can be guessed at from outside, and it always passes the request; calls
without one (Django's test client ``login()``, a shell) are left to the next backend unthrottled.
"""
from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class AxesBackend(AxesStandaloneBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request) -> str | None:
    """The client's address for login throttling (``AXES_CLIENT_IP_CALLABLE``).

    ``REMOTE_ADDR`` when the site is reached directly. Behind ``TRUSTED_PROXY_COUNT`` = n reverse proxies,
    each of which appends the address it received the request from to ``X-Forwarded-For`` (nginx's
    ``$proxy_add_x_forwarded_for``), the client is the n-th entry from the right; entries further left
    are whatever the client sent and are ignored. Falls back to ``REMOTE_ADDR`` when the header has
    fewer entries."""
    from django.conf import settings

    remote = request.META.get("REMOTE_ADDR")
    n = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0) or 0)
    if n <= 0:
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
    return hops[-n] if len(hops) >= n else remote
