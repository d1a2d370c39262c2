package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    *Config // nil: off
		wantErr string
	}{
		{name: "nothing set: off", env: nil},
		{name: "an endpoint: http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			want: &Config{Protocol: "http/protobuf", Endpoint: "http://c:4318"}},
		{name: "the traces endpoint wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"},
			want: &Config{Protocol: "http/protobuf", Endpoint: "http://t:4318/v1/traces"}},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: &Config{Protocol: "grpc", Endpoint: "http://c:4317"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "another exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			wantErr: `OTEL_TRACES_EXPORTER="zipkin": the host exports traces over OTLP`},
		{name: "http/json", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": the host exports traces as http/protobuf (the default) or grpc`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, tc.env[k])
			}
			got, err := FromEnv()
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Without Start, a reconcile's span and its host calls' cost nothing.
func TestBeginIsFreeWhenOff(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		c, span := Begin(ctx, "reconcile")
		if span.IsRecording() || Recording(c) || LogValues(c) != nil {
			t.Fatal("a span recorded with tracing off")
		}
		span.End()
	}); n != 0 {
		t.Fatalf("Begin allocated %v times with tracing off", n)
	}
}

type flakyExporter struct{ fail bool }

func (f *flakyExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	if f.fail {
		return errors.New("connection refused")
	}
	return nil
}
func (f *flakyExporter) Shutdown(context.Context) error { return nil }

// After failed exports, the first that works says so, with the spans dropped meanwhile.
func TestExporterSaysWhenItWorksAgain(t *testing.T) {
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	f := &flakyExporter{fail: true}
	e := &exporter{SpanExporter: f, log: log}
	spans := make([]sdktrace.ReadOnlySpan, 3)
	for range 2 {
		if err := e.ExportSpans(context.Background(), spans); err == nil {
			t.Fatal("a failed export returned no error")
		}
	}
	f.fail = false
	for range 2 {
		if err := e.ExportSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg"="exporting traces works again" "droppedSpans"=6`) {
		t.Fatalf("log: %q; want one line saying it works again, 6 spans dropped", lines)
	}
}
