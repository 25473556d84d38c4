"""Prometheus metrics of one app instance, in its own registry (no process-global state).

Requests are counted by route template (not raw path: ids would explode the label set) and
status; latency is recorded per request and per stage of a search (tokenize, engine, rerank if any,
total). The metrics are observed where they happen: requests by ``middleware.MetricsMiddleware``,
a search's stages by the pipeline (``SearchPipeline.stage``).
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

STAGES = ("tokenize", "engine", "total")
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServiceMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "vsparta_http_requests",
            "HTTP requests by route template, method and status code.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.request_latency = Histogram(
            "vsparta_http_request_duration_seconds",
            "Time from request to response, by route template.",
            ["route", "method"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.stage_latency = Histogram(
            "vsparta_search_stage_duration_seconds",
            "Time spent in each stage of a search: tokenize, engine (query round trip), rerank (if any), "
            "total.",
            ["stage"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        for stage in STAGES:  # export zeros before the first search, so dashboards see the series
            self.stage_latency.labels(stage=stage)

    def render(self) -> bytes:
        return generate_latest(self.registry)
