package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
)

// Name is the host's instrumentation scope.
const Name = "github.com/wasmrec/wasmrec/host"

// Attribute keys of the host's spans.
const (
	Controller = attribute.Key("wasmrec.controller") // the controller (a plugin's name)
	Key        = attribute.Key("wasmrec.key")        // the request: namespace/name, or name
	Result     = attribute.Key("wasmrec.result")     // success, error, requeue, requeue_after
	Digest     = attribute.Key("wasmrec.digest")     // the module version a reconcile ran on
	Version    = attribute.Key("wasmrec.version")    // live or candidate, during a rollout
	Call       = attribute.Key("wasmrec.call")       // a host call: get, list, patch...
	Status     = attribute.Key("wasmrec.status")     // its status: ok, not_found, forbidden...
)

// tracer is the host's, once Start or Use has installed a provider; nil until then.
var tracer atomic.Pointer[trace.Tracer]

// Begin starts a span named name under ctx's, with the host's tracer, once Start or Use has
// installed a provider. Until then it starts nothing and allocates nothing: it returns ctx and a
// span that records nothing. Set attributes only when span.IsRecording().
func Begin(ctx context.Context, name string) (context.Context, trace.Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, noSpan
	}
	return (*t).Start(ctx, name)
}

var noSpan = trace.SpanFromContext(context.Background())

// Use makes the host trace with tp, and propagate the W3C trace context on its API requests, so
// that an API server that traces continues the host's traces. Start calls it; a program that
// embeds the host and has a tracer provider of its own calls it instead.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := tp.Tracer(Name)
	tracer.Store(&t)
}

// Recording reports whether ctx carries a span being recorded: the host starts a host call's
// span only then, so that a reconcile not sampled pays nothing per host call.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// LogValues returns the key and value that tie a log line to its trace ("traceID", the id),
// or nil when ctx's span is not sampled.
func LogValues(ctx context.Context) []any {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		return []any{"traceID", sc.TraceID().String()}
	}
	return nil
}

// Config is what Start read from the environment.
type Config struct {
	Protocol string // http/protobuf or grpc
	Endpoint string // as the OTEL_EXPORTER_OTLP_* variable gave it
}

// FromEnv reads the standard variables: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp, the
// default, or none), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the
// default, or grpc). It returns nil when they ask for no export: tracing is off unless an
// endpoint is named. The exporters read the rest (headers, TLS, timeout, compression) and the
// SDK the OTEL_TRACES_SAMPLER and OTEL_BSP_* variables.
func FromEnv() (*Config, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch e := os.Getenv("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: the host exports traces over OTLP; set it to otlp (or leave it unset) with OTEL_EXPORTER_OTLP_ENDPOINT, or to none", e)
	}
	endpoint := cmpEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		return nil, nil
	}
	c := &Config{Protocol: cmpEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"), Endpoint: endpoint}
	switch c.Protocol {
	case "":
		c.Protocol = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: the host exports traces as http/protobuf (the default) or grpc", c.Protocol)
	}
	return c, nil
}

func cmpEnv(keys ...string) string {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// Start installs (Use) a tracer provider exporting over OTLP as c says, with service.name
// wasmrec (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it) and version. Export
// failures are logged to log, at most once a minute. The returned function flushes what is
// buffered and stops the export; call it at exit.
func Start(ctx context.Context, c *Config, version string, log logr.Logger) (shutdown func(context.Context) error, err error) {
	var exp sdktrace.SpanExporter
	switch c.Protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter for %s (%s): %w", c.Endpoint, c.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "wasmrec"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(&exporter{SpanExporter: exp, log: log}), sdktrace.WithResource(res))
	failures := rate.Sometimes{Interval: time.Minute}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		failures.Do(func() {
			kv := []any{"endpoint", c.Endpoint, "protocol", c.Protocol}
			if c.Protocol == "grpc" && strings.Contains(err.Error(), "frame too large") {
				kv = append(kv, "hint", "the endpoint answers HTTP/1: it serves OTLP over HTTP (usually port 4318); unset OTEL_EXPORTER_OTLP_PROTOCOL, or point at its gRPC port (usually 4317)")
			}
			log.Error(err, "exporting traces failed; the spans of that batch are dropped (said at most once a minute)", kv...)
		})
	}))
	Use(tp)
	log.Info("exporting traces over OTLP", "endpoint", c.Endpoint, "protocol", c.Protocol)
	return tp.Shutdown, nil
}

// exporter says when exporting works again after failures, and how many spans were dropped
// meanwhile (the SDK reports each failure to the error handler).
type exporter struct {
	sdktrace.SpanExporter
	log     logr.Logger
	failing atomic.Bool
	dropped atomic.Int64
}

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.failing.Store(true)
		e.dropped.Add(int64(len(spans)))
	} else if e.failing.Swap(false) {
		e.log.Info("exporting traces works again", "droppedSpans", e.dropped.Swap(0))
	}
	return err
}

// WrapConfig makes cfg's API requests spans of their own, under the span of the host call that
// sent them, once Start or Use has run; requests outside a span (informers' lists and watches) make
// none. Without Start it leaves cfg as it is.
func WrapConfig(cfg *rest.Config) {
	if tracer.Load() == nil {
		return
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt,
			otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }))
	})
}
