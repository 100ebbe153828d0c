from __future__ import annotations

from django.urls import path

from . import views

app_name = "compat"
# /compat/
urlpatterns = [
    path("", views.matrix_page, name="matrix"),
    path("verdict/", views.verdict_page, name="verdict"),
]
