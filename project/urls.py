"""URLs of the example project: admin, the weft API and its docs, /metrics."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from project.demo import views as demo_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/weft/", include("weft_django.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("demo/progress/", demo_views.start_progress, name="demo-start-progress"),
    path("demo/progress/<str:workflow_id>/", demo_views.progress, name="demo-progress"),
    path("", include("django_prometheus.urls")),
]
