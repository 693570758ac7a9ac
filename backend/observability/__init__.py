"""Observability: Prometheus metrics, OpenTelemetry tracing and structured logs.

A leaf package: it imports only prometheus-client, OpenTelemetry and structlog, so every
layer around the engine core (db, services, workers, api) may record into it.
"""
