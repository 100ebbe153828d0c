from __future__ import annotations

from django.urls import path

from . import views

app_name = "validator"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new", views.new, name="new"),
    path("compare", views.compare, name="compare"),
    path("presets", views.presets, name="presets"),
    path("<uuid:run_id>/", views.detail, name="detail"),
    path("<uuid:run_id>/status", views.status, name="status"),
    path("<uuid:run_id>/cancel", views.cancel, name="cancel"),
]
