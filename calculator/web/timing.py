"""``Server-Timing: app;dur=<ms>`` on every response: the time Django spent on the request (from this
middleware, first in the chain, to the response), so ``benchmarks/web_load.py`` and a browser's network panel
read the server's time apart from the network's."""

from __future__ import annotations

import time


class ServerTimingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        start = time.perf_counter()
        response = self.get_response(request)
        response["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.1f}"
        return response
