package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every span it is sent.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", req.URL.Path, err), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.URL = "http://" + l.Addr().String()
	return r
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyValue(kv.Value)
		}
	}
	return ""
}

func anyValue(v *commonpb.AnyValue) string {
	switch v := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return v.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(v.IntValue)
	}
	return fmt.Sprint(v)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, one reconcile is one trace: the reconcile's span (the
// plugin, the key, the module's digest, the result), a span per host call under it, and the
// API request the patch sent under that call's span; the reconcile's log lines carry the trace
// id.
func TestReconcileTrace(t *testing.T) {
	recv := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // ms: export soon after the reconcile
	ns := namespace(t)
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: traced
    module: %s
    namespaces: [%s]
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch, patch]}
`, wasmFile(t, "testguests", "hashc"), ns), "-v", "1")
	h.waitOut(t, `msg="exporting traces over OTLP"`)
	h.waitOut(t, `msg="starting workers" plugin=traced`)
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "traced"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	must(t, err)

	key := ns + "/traced"
	var root, get, patch, request *tracepb.Span
	eventually(t, 30*time.Second, "a trace of the reconcile that patched "+key, func() error {
		spans := recv.all()
		root, get, patch, request = nil, nil, nil, nil
		for _, s := range spans { // the first reconcile patches; a later one finds the hash set
			if s.Name == "reconcile" && spanAttr(s, "wasmrec.key") == key && spanAttr(s, "wasmrec.result") == "success" {
				for _, c := range spans {
					if string(c.ParentSpanId) == string(s.SpanId) && c.Name == "host patch" {
						root, patch = s, c
					}
				}
			}
		}
		if root == nil {
			return fmt.Errorf("no reconcile span of %s with a host patch under it among %d spans", key, len(spans))
		}
		for _, s := range spans {
			switch {
			case string(s.ParentSpanId) == string(root.SpanId) && s.Name == "host get":
				get = s
			case string(s.ParentSpanId) == string(patch.SpanId):
				request = s
			}
		}
		if get == nil || request == nil {
			return fmt.Errorf("the reconcile's trace has no host get (%v) or no API request under its patch (%v)", get != nil, request != nil)
		}
		return nil
	})
	for name, want := range map[string]string{"wasmrec.controller": "traced", "wasmrec.result": "success"} {
		if got := spanAttr(root, name); got != want {
			t.Errorf("reconcile span: %s=%q, want %q", name, got, want)
		}
	}
	if d := spanAttr(root, "wasmrec.digest"); !strings.HasPrefix(d, "sha256:") {
		t.Errorf("reconcile span: wasmrec.digest=%q, want the module's digest", d)
	}
	for _, s := range []*tracepb.Span{get, patch, request} {
		if string(s.TraceId) != string(root.TraceId) {
			t.Errorf("span %q is in another trace than its reconcile", s.Name)
		}
	}
	if got := spanAttr(patch, "wasmrec.status"); got != "ok" {
		t.Errorf("host patch span: wasmrec.status=%q, want ok", got)
	}
	if m := spanAttr(request, "http.request.method"); m != "PATCH" || request.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("the API request's span: %q, kind %v, method %q; want a PATCH client span", request.Name, request.Kind, m)
	}
	traceID := fmt.Sprintf("%x", root.TraceId)
	h.waitOut(t, `traceID=`+traceID)
	h.terminate(t)
	t.Logf("trace %s: %s (%s) > %s, %s > %s %s", traceID, root.Name, time.Duration(root.EndTimeUnixNano-root.StartTimeUnixNano),
		get.Name, patch.Name, request.Name, spanAttr(request, "url.full"))
}
