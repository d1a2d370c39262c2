// Package tracing gives the host's OpenTelemetry spans: one per reconcile, one per host call a
// guest makes in it, and one per API request that call sends, all in one trace. Start exports
// them over OTLP when the standard OTEL_* variables name an endpoint; without one, the tracer
// is OpenTelemetry's no-op and the host starts no span below a reconcile's.
package tracing
