from django.urls import path

from calculator.web import views

app_name = "calculator"

urlpatterns = [
    # /
    path("", views.home, name="home"),
    # /api/estimate?<same parameters as the form>
    path("api/estimate", views.api_estimate, name="api-estimate"),
]
