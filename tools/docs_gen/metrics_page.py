"""The metrics page: what engines export and what the cluster collector serves."""

from __future__ import annotations

import itertools
import re

from .markdown import page, table


def _engine_families() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``[(name, type, help, labels)]`` from ``to_prometheus_text`` of a full snapshot."""
    from weft_django.metrics.business import BusinessMetrics
    from weft_django.ownership.metrics import (
        CLAIM_ATTEMPT_OUTCOMES,
        WAKE_DECISIONS,
        WAKE_KINDS,
        WAKE_TRANSPORTS,
        ClaimMetricsSnapshot,
        to_prometheus_text,
    )

    business = BusinessMetrics()
    business.record_workflow_finished("example", "completed", 1.0)
    business.record_activity_attempt("example", "completed", 1.0)
    snapshot = ClaimMetricsSnapshot(
        business=business.snapshot(),
        attempts=dict.fromkeys(CLAIM_ATTEMPT_OUTCOMES, 1),
        active_claims=1,
        renewal_failures=1,
        abandoned_activity_threads=1,
        workflow_cache_hits=1,
        workflow_cache_misses=1,
        wakes=dict.fromkeys(itertools.product(WAKE_KINDS, WAKE_DECISIONS, WAKE_TRANSPORTS), 1),
    )
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    labels: dict[str, list[str]] = {}
    for line in to_prometheus_text(snapshot).splitlines():
        if line.startswith("# HELP "):
            name, _, text = line[len("# HELP ") :].partition(" ")
            helps[name] = text
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE ") :].partition(" ")
            types[name] = kind
            labels.setdefault(name, [])
        elif line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if name not in labels:  # a histogram's _bucket, _sum, _count
                name = re.sub(r"_(bucket|sum|count)$", "", name)
            for label in re.findall(r'(\w+)="', line):
                if label not in labels[name]:
                    labels[name].append(label)
    return [(n, types[n], helps.get(n, ""), tuple(labels[n])) for n in types]


def engine_metric_names() -> list[str]:
    """The metric names ``ownership.metrics.to_prometheus_text`` emits."""
    return [name for name, *_ in _engine_families()]


def _collector_families() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``[(exposed name, type, help, labels)]`` of the cluster collector."""
    from weft_django.contrib.prometheus import WeftClusterCollector

    found = []
    for family in WeftClusterCollector._families().values():
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = tuple(getattr(family, "_labelnames", ()))
        found.append((name, family.type, family.documentation, labels))
    return found


def collector_metric_names() -> list[str]:
    """The sample names ``contrib.prometheus.WeftClusterCollector`` serves."""
    return [name for name, *_ in _collector_families()]


def render_metrics() -> str:
    from weft_django.ownership.metrics import CLOSED_LABEL_SETS

    def rows(families: list[tuple[str, str, str, tuple[str, ...]]]) -> list[tuple[str, ...]]:
        return [
            (f"`{name}`", kind, ", ".join(f"`{lab}`" for lab in labels) or "—", help_text)
            for name, kind, help_text, labels in families
        ]

    label_rows = [
        (f"`{label}`", ", ".join(f"`{v}`" for v in values))
        for label, values in CLOSED_LABEL_SETS.items()
    ]
    from weft_django.metrics.business import (
        ACTIVITY_ATTEMPT_OUTCOMES,
        MAX_TYPE_NAMES,
        WORKFLOW_END_STATUSES,
    )

    label_rows += [
        (
            "`workflow`",
            "a workflow type name registered in the recording process (`@workflow`), else "
            f"`other`; at most {MAX_TYPE_NAMES} names",
        ),
        (
            "`activity`",
            "an activity type name registered in the recording process (`@activity`), else "
            f"`other`; at most {MAX_TYPE_NAMES} names",
        ),
        (
            "`status` (`weft_workflows_finished_total`)",
            ", ".join(f"`{v}`" for v in WORKFLOW_END_STATUSES),
        ),
        (
            "`outcome` (`weft_activity_attempts_total`)",
            ", ".join(f"`{v}`" for v in ACTIVITY_ATTEMPT_OUTCOMES),
        ),
        ("`le`", "the fixed histogram bucket bounds (seconds), `+Inf`"),
    ]
    return page(
        "Metrics reference",
        """
        Counters are kept per engine in pure Python
        (`weft_django.ownership.metrics.ClaimMetrics`); each engine writes them
        into its `EngineRecord.metrics` at every heartbeat. With the `metrics`
        extra (`pip install "weft-django[metrics]"`), a `prometheus_client`
        collector sums the folded totals of pruned records (`MetricTotals`)
        and every remaining record from the database at scrape time and adds
        cluster gauges, so django-prometheus's `/metrics` in **any** process
        (a web worker, say) shows the cluster's truth. It is registered when
        `django_prometheus` is installed, or when
        `WEFT["PROMETHEUS_COLLECTOR"] = True`; set it to `False` to opt out.
        The REST API's `metrics/` endpoint serves the same counters as JSON.

        Every `weft_*` series is a **cluster total**: every target serving it
        reports the same value, so aggregate it across targets with `max`,
        never `sum` (see [the metrics how-to](../howto/metrics.md)). Counters
        never decrease: records older than `WEFT["ENGINE_RECORD_RETENTION"]`
        are folded into `MetricTotals` in the transaction that deletes them.

        Every label value comes from a closed set or is a registered type
        name; **a workflow id, a run id or an engine id is never a label**.
        """,
        "## Served by the cluster collector (`/metrics`)\n",
        table(("metric", "type", "labels", "meaning"), rows(_collector_families())),
        "## One engine's counters (`to_prometheus_text`)\n",
        "`weft_django.ownership.metrics.to_prometheus_text(engine.metrics.snapshot())` renders "
        "one engine's own counters in the Prometheus text format:\n",
        table(("metric", "type", "labels", "meaning"), rows(_engine_families())),
        "## Label values\n",
        table(("label", "values"), label_rows),
    )
