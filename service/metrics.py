"""Prometheus metrics of one app instance, in its own registry (no process-global state).

Requests are counted by route template (not raw path: ids would explode the label set) and
status; latency is recorded per request and per stage of a search (tokenize, engine, rerank if any, total).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

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

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stage_latency.labels(stage=name).observe(time.perf_counter() - start)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        self.request_latency.labels(route=route, method=method).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
