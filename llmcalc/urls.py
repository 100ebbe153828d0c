from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("compat/", include("compat.urls")),
    path("runs/", include("validator.urls")),
    path("", include("calculator.urls")),
]
