# The run as an OpenTelemetry trace: to a receiver (Phoenix, Jaeger, Tempo,
# a collector) with --endpoint http://localhost:4318/v1/traces, or, as
# here, to an OTLP/JSON file for a collector to read later.
bluetape-flow otel-export --run-id "$RUN" --out run.otlp.json
