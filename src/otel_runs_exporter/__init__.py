"""Send OpenTelemetry traces to an LLM-observability service as runs."""
