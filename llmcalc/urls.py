from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("compat/", include("compat.urls")),
    path("runs/", include("validator.urls")),
    path("", include("calculator.urls")),
]

# Friendly error pages that keep the user's parameters (calculator/web/errors.py).
handler400 = "calculator.web.errors.bad_request"
handler404 = "calculator.web.errors.page_not_found"
handler500 = "calculator.web.errors.server_error"
