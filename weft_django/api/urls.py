"""Routes of the weft REST API: ``path("api/weft/", include("weft_django.api.urls"))``.

Why path converters: workflow ids may contain ``:``, ``@`` and ``.``
(``order:o-1``, ``user@example.com``), which ``<str:...>`` would accept
along with characters no workflow id can have; the converter matches
exactly the id grammar of SPEC §2, and drf-spectacular publishes its regex
as the parameter's ``pattern``. Tokens are matched as URL-safe text; an
unknown one is a 404 from the view, not from the router. The token routes
come in two forms: without the token in the path (it travels in a header
or the body, out of access logs; preferred) and with it.

The last route catches everything else under the API's prefix (an id
outside the grammar, a missing trailing slash, a typo) and answers a JSON
404 with a code, so no response of the API is Django's HTML error page.
"""

from __future__ import annotations

from importlib.util import find_spec

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, URLResolver, path, re_path, register_converter
from django.urls.converters import get_converters

# The API is an optional extra: say how to get it instead of a bare ImportError.
_missing = [name for name in ("rest_framework", "drf_spectacular") if find_spec(name) is None]
if _missing:
    raise ImproperlyConfigured(
        f"The weft REST API needs {' and '.join(_missing)}: "
        'pip install "weft-django[api]" (Django REST framework and drf-spectacular).'
    )

from weft_django.api import views  # noqa: E402  (after the check above)
from weft_django.api.views.bulk import (  # noqa: E402
    WorkflowCancelManyView,
    WorkflowResumeManyView,
    WorkflowRetryManyView,
)
from weft_django.api.views.published import (  # noqa: E402
    WorkflowEventsView,
    WorkflowEventView,
    WorkflowStreamView,
)
from weft_django.api.views.schedules import schedule_urls  # noqa: E402
from weft_django.api.views.signal_with_start import WorkflowSignalWithStartView  # noqa: E402
from weft_django.api.views.update import WorkflowUpdateView  # noqa: E402
from weft_django.kernel.ids import TOKEN_CHARS, WORKFLOW_ID_CHARS  # noqa: E402


class WorkflowIdConverter:
    """The workflow-id grammar of SPEC §2 (``weft_django.kernel.ids``)."""

    regex = WORKFLOW_ID_CHARS

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class AsyncTokenConverter:
    """URL-unreserved characters; the token itself is checked against its hash."""

    regex = TOKEN_CHARS

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


# Registering a converter name twice is deprecated (Django 5.1+): a second
# import of this module (e.g. from another URLconf) must not do it again.
for _name, _converter in (
    ("weft_workflow_id", WorkflowIdConverter),
    ("weft_async_token", AsyncTokenConverter),
):
    if _name not in get_converters():
        register_converter(_converter, _name)

app_name = "weft"

_WORKFLOW = "workflows/<weft_workflow_id:workflow_id>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("workflows/", views.WorkflowListView.as_view(), name="workflow-list"),
    path(_WORKFLOW, views.WorkflowDetailView.as_view(), name="workflow-detail"),
    path(_WORKFLOW + "history/", views.WorkflowHistoryView.as_view(), name="workflow-history"),
    path(_WORKFLOW + "signal/", views.WorkflowSignalView.as_view(), name="workflow-signal"),
    path(
        _WORKFLOW + "signal-with-start/",
        WorkflowSignalWithStartView.as_view(),
        name="workflow-signal-with-start",
    ),
    path(_WORKFLOW + "cancel/", views.WorkflowCancelView.as_view(), name="workflow-cancel"),
    path(_WORKFLOW + "suspend/", views.WorkflowSuspendView.as_view(), name="workflow-suspend"),
    path(_WORKFLOW + "resume/", views.WorkflowResumeView.as_view(), name="workflow-resume"),
    path(_WORKFLOW + "retry/", views.WorkflowRetryView.as_view(), name="workflow-retry"),
    path(_WORKFLOW + "purge/", views.WorkflowPurgeView.as_view(), name="workflow-purge"),
    path(_WORKFLOW + "query/", views.WorkflowQueryView.as_view(), name="workflow-query"),
    path(_WORKFLOW + "fork/", views.WorkflowForkView.as_view(), name="workflow-fork"),
    path(_WORKFLOW + "reset/", views.WorkflowResetView.as_view(), name="workflow-reset"),
    path(_WORKFLOW + "update/", WorkflowUpdateView.as_view(), name="workflow-update"),
    path(
        _WORKFLOW + "ownership/", views.WorkflowOwnershipView.as_view(), name="workflow-ownership"
    ),
    path(
        _WORKFLOW + "claim-events/",
        views.WorkflowClaimEventsView.as_view(),
        name="workflow-claim-events",
    ),
    path(_WORKFLOW + "events/", WorkflowEventsView.as_view(), name="workflow-events"),
    path(_WORKFLOW + "events/<str:key>/", WorkflowEventView.as_view(), name="workflow-event"),
    path(_WORKFLOW + "streams/<str:key>/", WorkflowStreamView.as_view(), name="workflow-stream"),
    # Not under workflows/: any segment there may be a workflow id (api.views.bulk).
    path("bulk/cancel/", WorkflowCancelManyView.as_view(), name="bulk-cancel"),
    path("bulk/resume/", WorkflowResumeManyView.as_view(), name="bulk-resume"),
    path("bulk/retry/", WorkflowRetryManyView.as_view(), name="bulk-retry"),
    path("claims/", views.ClaimListView.as_view(), name="claim-list"),
    path("engines/", views.EngineListView.as_view(), name="engine-list"),
    path("metrics/", views.MetricsView.as_view(), name="metrics"),
    # The token in the Weft-Async-Token header or the body (preferred: out of access logs).
    path(
        "async-activities/complete/",
        views.AsyncActivityCompleteByTokenView.as_view(),
        name="async-complete",
    ),
    path("async-activities/fail/", views.AsyncActivityFailByTokenView.as_view(), name="async-fail"),
    path(
        "async-activities/<weft_async_token:token>/complete/",
        views.AsyncActivityCompleteView.as_view(),
        name="async-activity-complete",
    ),
    path(
        "async-activities/<weft_async_token:token>/fail/",
        views.AsyncActivityFailView.as_view(),
        name="async-activity-fail",
    ),
    *schedule_urls("schedules/<weft_workflow_id:schedule_id>/"),
    re_path(r"^[\s\S]*$", views.not_found, name="not-found"),  # "." would miss a newline
]
