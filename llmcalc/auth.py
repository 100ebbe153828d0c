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
