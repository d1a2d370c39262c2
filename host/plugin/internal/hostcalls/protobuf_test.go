package hostcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// benchDeployment is a Deployment as the API server would send it (about 2 KiB), as
// host/wasm's BenchmarkReconcile has it.
func benchDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web", "tier": "frontend", "team": "storefront"}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "deployment", Namespace: "bench", UID: "6f1c1b4e-2b8e-4a43-9d6e-1c5d0f0e7a11",
			ResourceVersion: "123456", Generation: 7, Labels: labels, CreationTimestamp: metav1.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "7", "wasmrec.dev/rollout-on-config-change": "true"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"wasmrec.dev/config-hash": "ccd4fb8a8b4f9998"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "web", Image: "registry.example/storefront/web:1.42.0",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
						Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
						},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 7, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 3},
	}
}

func cached(t testing.TB, v any) *object.Object {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	o, err := object.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// answers is a wasmrec.Transport that answers get and list as Calls.get and Calls.list do,
// from objects of one kind.
type answers struct {
	gvk     schema.GroupVersionKind
	objects []*object.Object
	sent    *string // "protobuf" or "json": the last answer's encoding
}

func (a answers) Call(ctx context.Context, fn string, body []byte) (abi.Status, []byte) {
	s, resp := a.answer(fn, body)
	*a.sent = encodingOf(resp)
	return s, resp
}

// encodingOf is "protobuf" or "json", by an answer's first bytes.
func encodingOf(resp []byte) string {
	if strings.HasPrefix(string(resp), abi.ProtobufMagic) {
		return "protobuf"
	}
	return "json"
}

func (a answers) answer(fn string, body []byte) (abi.Status, []byte) {
	var req abi.ListRequest // a get's fields too
	if err := json.Unmarshal(body, &req); err != nil {
		return abi.StatusBadRequest, []byte(err.Error())
	}
	proto := req.Encoding == abi.EncodingProtobuf
	if fn == abi.ImportGet {
		if proto {
			if b, ok := protobufObject(a.gvk, a.objects[0]); ok {
				return abi.StatusOK, b
			}
		}
		return abi.StatusOK, a.objects[0].Raw
	}
	if proto {
		if b, ok := protobufList(a.gvk, a.objects); ok {
			return abi.StatusOK, b
		}
	}
	out := []byte(`{"items":[`)
	for i, o := range a.objects {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, o.Raw...)
	}
	return abi.StatusOK, append(out, "]}"...)
}

func (answers) Log(int32, []byte) {}

// jsonOnly hides a typed object's protobuf methods: the SDK asks for, and decodes, JSON.
type jsonOnly struct{ v any }

func (j jsonOnly) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, j.v) }

func TestAProtobufGetDecodesAsTheJSONGet(t *testing.T) {
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "demo"},
		Data: map[string][]byte{"bin": {0, 1, 0xff, 'x'}}, Type: corev1.SecretTypeOpaque}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "demo",
		Labels: map[string]string{"app": "web"}, Finalizers: []string{"example.com/f"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u", Controller: ptr.To(true)}}},
		Data: map[string]string{"é": "🙂\u2028"}, BinaryData: map[string][]byte{"b": []byte("bytes")}, Immutable: ptr.To(false)}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	for _, tc := range []struct {
		gvk        schema.GroupVersionKind
		obj        any
		fromProto  func() any
		fromJSON   func() any
		namespaced bool
	}{
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), benchDeployment(), func() any { return &appsv1.Deployment{} }, func() any { return &appsv1.Deployment{} }, true},
		{corev1.SchemeGroupVersion.WithKind("Secret"), secret, func() any { return &corev1.Secret{} }, func() any { return &corev1.Secret{} }, true},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), cm, func() any { return &corev1.ConfigMap{} }, func() any { return &corev1.ConfigMap{} }, true},
		{corev1.SchemeGroupVersion.WithKind("Namespace"), ns, func() any { return &corev1.Namespace{} }, func() any { return &corev1.Namespace{} }, false},
	} {
		o := cached(t, tc.obj)
		b, ok := protobufObject(tc.gvk, o)
		if !ok || !strings.HasPrefix(string(b), abi.ProtobufMagic) {
			t.Fatalf("%s: no protobuf answer (%v): %q", tc.gvk.Kind, ok, b)
		}
		var sent string
		c := wasmrec.NewClientWith(answers{gvk: tc.gvk, objects: []*object.Object{o}, sent: &sent})
		got, want := tc.fromProto(), tc.fromJSON()
		if err := c.GetInto(context.Background(), tc.gvk.GroupVersion().String(), tc.gvk.Kind, "demo", "x", got); err != nil || sent != "protobuf" {
			t.Fatalf("%s from protobuf: %v; the host answered %s", tc.gvk.Kind, err, sent)
		}
		if err := c.GetInto(context.Background(), tc.gvk.GroupVersion().String(), tc.gvk.Kind, "demo", "x", &jsonOnly{want}); err != nil || sent != "json" {
			t.Fatalf("%s from JSON: %v; the host answered %s", tc.gvk.Kind, err, sent)
		}
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: from protobuf\n%+v\nfrom JSON\n%+v", tc.gvk.Kind, got, want)
		}
		if !apiequality.Semantic.DeepEqual(got, tc.obj) {
			t.Errorf("%s: from protobuf\n%+v\nwant\n%+v", tc.gvk.Kind, got, tc.obj)
		}
	}
}

func TestAProtobufListDecodesAsTheJSONList(t *testing.T) {
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	a, b := benchDeployment(), benchDeployment()
	b.Name, b.Spec.Replicas = "other", ptr.To[int32](5)
	var sent string
	c := wasmrec.NewClientWith(answers{gvk: gvk, objects: []*object.Object{cached(t, a), cached(t, b)}, sent: &sent})
	var fromProto, fromJSON appsv1.DeploymentList
	if err := c.ListInto(context.Background(), "apps/v1", "Deployment", "bench", "", &fromProto); err != nil || sent != "protobuf" {
		t.Fatalf("%v; the host answered %s", err, sent)
	}
	if err := c.ListInto(context.Background(), "apps/v1", "Deployment", "bench", "", &jsonOnly{&fromJSON}); err != nil || sent != "json" {
		t.Fatalf("%v; the host answered %s", err, sent)
	}
	if len(fromProto.Items) != 2 || fromProto.Items[1].Name != "other" || *fromProto.Items[1].Spec.Replicas != 5 {
		t.Fatalf("from protobuf: %+v", fromProto)
	}
	if !apiequality.Semantic.DeepEqual(fromProto, fromJSON) {
		t.Errorf("from protobuf\n%+v\nfrom JSON\n%+v", fromProto, fromJSON)
	}
}

func TestKindsAndObjectsTheHostCannotEncodeWhollyAreAnsweredJSON(t *testing.T) {
	app := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.wasmrec.dev/v1", "kind": "App", "metadata": map[string]any{"name": "web", "namespace": "demo"}, "spec": map[string]any{"port": int64(80)}}}
	if b, ok := protobufObject(schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}, cached(t, app)); ok {
		t.Errorf("a custom resource: %q; want no protobuf answer", b)
	}
	// A field newer than the host's types: the protobuf would lose it.
	newer := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo"},"data":{"k":"v"},"fieldFromTheFuture":1}`)
	o, err := object.Decode(newer)
	if err != nil {
		t.Fatal(err)
	}
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	if b, ok := protobufObject(cmGVK, o); ok {
		t.Errorf("a ConfigMap with a field the host's types lack: %q; want no protobuf answer", b)
	}
	plain, _ := object.Decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo"},"data":{"k":"v"}}`))
	if _, ok := protobufList(cmGVK, []*object.Object{plain, o}); ok {
		t.Errorf("a list with such an item has a protobuf answer; want JSON")
	}
	if _, ok := protobufList(cmGVK, []*object.Object{plain}); !ok {
		t.Errorf("a list of a plain ConfigMap has no protobuf answer")
	}
}

// BenchmarkProtobufGet is what a get asking for protobuf adds to the host's work. "json" is a
// get's answer as it is (the cached JSON); "protobuf-first" is the first protobuf get of an
// object (of each version of it): its JSON decoded into the typed object ("typed", the larger
// part), and that encoded; "protobuf-again" is every later one, the encoding kept on the object.
func BenchmarkProtobufGet(b *testing.B) {
	o := cached(b, benchDeployment())
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			_ = o.Raw
		}
		b.ReportMetric(float64(len(o.Raw)), "B/answer")
	})
	b.Run("protobuf-first", func(b *testing.B) {
		var n int
		for b.Loop() {
			out, ok := object.ProtobufOf(gvk, o.Raw)
			if !ok {
				b.Fatal("no protobuf answer")
			}
			n = len(out)
		}
		b.ReportMetric(float64(n), "B/answer")
	})
	b.Run("typed", func(b *testing.B) {
		for b.Loop() {
			if _, ok := object.Typed(gvk, o.Raw); !ok {
				b.Fatal("not typed")
			}
		}
	})
	b.Run("protobuf-again", func(b *testing.B) {
		for b.Loop() {
			if _, ok := protobufObject(gvk, o); !ok {
				b.Fatal("no protobuf answer")
			}
		}
	})
	// A list of 100 Deployments whose encodings are made: what a protobuf list costs the host
	// past the JSON list's work.
	items := make([]*object.Object, 100)
	for i := range items {
		d := benchDeployment()
		d.Name = fmt.Sprint("d", i)
		items[i] = cached(b, d)
		items[i].Protobuf(gvk)
	}
	b.Run("list-100-protobuf-again", func(b *testing.B) {
		for b.Loop() {
			if _, ok := protobufList(gvk, items); !ok {
				b.Fatal("no protobuf answer")
			}
		}
	})
}

// protobufReads: through Calls, from the host's informers of a real API server, a get and a
// list asking for protobuf decode, with the SDK, to what the JSON ones decode to; a custom
// resource's are answered JSON.
func (h *tableHost) protobufReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	perms := []abi.Permission{
		{Group: "", Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
		{Group: "demo.wasmrec.dev", Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
	}
	pol, err := policy.New("protobuf", perms, perms, []string{"demo"}, false)
	if err != nil {
		t.Fatal(err)
	}
	infs := informers.New(h.cache, nil)
	defer infs.Close()
	reader := NewReader(infs, h.cache.RESTMapper(), []string{"demo"}, nil)
	api := (&API{Name: "protobuf", For: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Mapper: h.cache.RESTMapper(), Objects: h.objects, Recorder: h.record, Reader: reader,
		Reads: NewLimit("reads", 1000, 1000, nil, nil), Writes: NewLimit("writes", 1000, 1000, nil, nil), Log: logr.Discard()}).Init()
	calls := &Calls{API: api, Policy: pol}
	var sent string
	c := wasmrec.NewClientWith(callsTransport{calls, &sent})

	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "pb-a", "namespace": "demo", "labels": map[string]any{"app": "pb"},
			"annotations": map[string]any{object.LastApplied: "{}"}}, "data": map[string]any{"k": "v", "empty": ""}, "binaryData": map[string]any{"b": "AAH/"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "pb-b", "namespace": "demo", "labels": map[string]any{"app": "pb"}}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "pb-s", "namespace": "demo"}, "data": map[string]any{"p": "c2VjcmV0"}, "type": "Opaque"},
		{"apiVersion": "demo.wasmrec.dev/v1", "kind": "App", "metadata": map[string]any{"name": "pb-app", "namespace": "demo"}, "spec": map[string]any{"message": "hi", "port": int64(8080)}},
	}
	touched := map[tableKey]bool{}
	defer h.cleanup(t, touched)
	for _, o := range objs {
		k := keyOf(o)
		touched[k] = true
		h.put(t, ctx, k, o)
	}
	h.await(t, ctx, reader, touched)

	// What the guest is answered, by its first bytes.
	answer := func(fn string, req any) string {
		body, _ := json.Marshal(req)
		s, resp := calls.Call(ctx, fn, body)
		if s != abi.StatusOK {
			t.Fatalf("%s %s: %s %s", fn, body, s, resp)
		}
		return encodingOf(resp)
	}
	for _, tc := range []struct {
		fn, apiVersion, kind, name, want string
	}{
		{abi.ImportGet, "v1", "ConfigMap", "pb-a", "protobuf"},
		{abi.ImportGet, "v1", "Secret", "pb-s", "protobuf"},
		{abi.ImportList, "v1", "ConfigMap", "", "protobuf"},
		{abi.ImportGet, "demo.wasmrec.dev/v1", "App", "pb-app", "json"},
		{abi.ImportList, "demo.wasmrec.dev/v1", "App", "", "json"},
	} {
		var req any = abi.GetRequest{ObjectRef: abi.ObjectRef{APIVersion: tc.apiVersion, Kind: tc.kind, Namespace: "demo", Name: tc.name}, Encoding: abi.EncodingProtobuf}
		if tc.fn == abi.ImportList {
			req = abi.ListRequest{APIVersion: tc.apiVersion, Kind: tc.kind, Namespace: "demo", Encoding: abi.EncodingProtobuf}
		}
		if got := answer(tc.fn, req); got != tc.want {
			t.Errorf("%s %s %s asking for protobuf: answered %s; want %s", tc.fn, tc.kind, tc.name, got, tc.want)
		}
	}

	for _, tc := range []struct {
		kind, name  string
		proto, json func() any
	}{
		{"ConfigMap", "pb-a", func() any { return &corev1.ConfigMap{} }, func() any { return &corev1.ConfigMap{} }},
		{"Secret", "pb-s", func() any { return &corev1.Secret{} }, func() any { return &corev1.Secret{} }},
	} {
		got, want := tc.proto(), tc.json()
		if err := c.GetInto(ctx, "v1", tc.kind, "demo", tc.name, got); err != nil || sent != "protobuf" {
			t.Fatalf("%v; the host answered %s", err, sent)
		}
		if err := c.GetInto(ctx, "v1", tc.kind, "demo", tc.name, &jsonOnly{want}); err != nil || sent != "json" {
			t.Fatalf("%v; the host answered %s", err, sent)
		}
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s from protobuf\n%+v\nfrom JSON\n%+v", tc.kind, got, want)
		}
	}
	var fromProto, fromJSON corev1.ConfigMapList
	if err := c.ListInto(ctx, "v1", "ConfigMap", "demo", "app=pb", &fromProto); err != nil || sent != "protobuf" {
		t.Fatalf("%v; the host answered %s", err, sent)
	}
	if err := c.ListInto(ctx, "v1", "ConfigMap", "demo", "app=pb", &jsonOnly{&fromJSON}); err != nil {
		t.Fatal(err)
	}
	if len(fromProto.Items) != 2 || !apiequality.Semantic.DeepEqual(fromProto, fromJSON) {
		t.Errorf("list from protobuf\n%+v\nfrom JSON\n%+v", fromProto, fromJSON)
	}
	// A custom resource asked for into a type with protobuf methods is decoded from JSON.
	var app App
	if err := c.GetInto(ctx, "demo.wasmrec.dev/v1", "App", "demo", "pb-app", &app); err != nil || sent != "json" || app.Spec.Port != 8080 || app.Kind != "App" {
		t.Errorf("App: %+v, %v; want port 8080 from JSON", app, err)
	}
}

// App has the protobuf methods, as a guest's generated type of a CRD might, and is named for
// its kind: the SDK asks for protobuf, and the host answers JSON all the same.
type App struct {
	metav1.TypeMeta `json:",inline"`
	Spec            struct{ Port int } `json:"spec"`
}

func (*App) MarshalToSizedBuffer([]byte) (int, error) { return 0, errors.New("not used") }
func (*App) Unmarshal([]byte) error                   { return errors.New("no protobuf for a custom resource") }

// callsTransport makes the SDK's calls through Calls, as the wasm runtime does a guest's.
// sent is the last answer's encoding.
type callsTransport struct {
	c    *Calls
	sent *string
}

func (t callsTransport) Call(ctx context.Context, fn string, body []byte) (abi.Status, []byte) {
	s, resp := t.c.Call(ctx, fn, body)
	*t.sent = encodingOf(resp)
	return s, resp
}

func (callsTransport) Log(int32, []byte) {}

// A List is put together from its items' encodings as its type encodes it, for every built-in
// kind with a List (a kind where it were not would be answered JSON).
func TestListsArePutTogetherAsTheirTypesEncodeThem(t *testing.T) {
	n := 0
	for gvk := range scheme.Scheme.AllKnownTypes() {
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if gvk.Version == runtime.APIVersionInternal || !scheme.Scheme.Recognizes(listGVK) {
			continue
		}
		if _, err := meta.Accessor(mustNew(t, gvk)); err != nil {
			continue // not an object (an options type)
		}
		n++
		if !listOfItems(gvk, listGVK) {
			t.Errorf("%s: not put together as its type encodes it", listGVK)
		}
	}
	if n < 50 {
		t.Errorf("%d kinds with a List; want the scheme's many", n)
	}
}

func mustNew(t *testing.T, gvk schema.GroupVersionKind) runtime.Object {
	o, err := scheme.Scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
