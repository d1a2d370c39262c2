package wasm_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// deploymentJSON is a Deployment as the API server would send it (about 2 KiB).
var deploymentJSON = func() []byte {
	labels := map[string]string{"app": "web", "tier": "frontend", "team": "storefront"}
	d := appsv1.Deployment{
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
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}()

// deploymentProtobuf is deploymentJSON in the Kubernetes protobuf envelope, as the host answers
// a get asking for it once it has made it (object.Object.Protobuf).
var deploymentProtobuf = func() []byte {
	b, ok := object.ProtobufOf(appsv1.SchemeGroupVersion.WithKind("Deployment"), deploymentJSON)
	if !ok {
		panic("the bench Deployment has no protobuf encoding")
	}
	return b
}()

// cannedHost answers every get with deploymentJSON, or deploymentProtobuf if the get asks for
// protobuf. convert makes the protobuf from the JSON on each call, as the host's first get of
// an object does.
type cannedHost struct{ convert bool }

func (h cannedHost) Call(_ context.Context, _ string, body []byte) (abi.Status, []byte) {
	if !bytes.Contains(body, []byte(`"encoding":"protobuf"`)) {
		return abi.StatusOK, deploymentJSON
	}
	if h.convert {
		b, _ := object.ProtobufOf(appsv1.SchemeGroupVersion.WithKind("Deployment"), deploymentJSON)
		return abi.StatusOK, b
	}
	return abi.StatusOK, deploymentProtobuf
}

// nativeDeployment decodes deploymentJSON into appsv1.Deployment natively.
func nativeDeployment() error {
	var d appsv1.Deployment
	if err := json.Unmarshal(deploymentJSON, &d); err != nil {
		return err
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("decoded no containers")
	}
	return nil
}

// nativeObject decodes deploymentJSON into a map[string]any natively.
func nativeObject() error {
	var o map[string]any
	if err := json.Unmarshal(deploymentJSON, &o); err != nil {
		return err
	}
	if o["spec"] == nil {
		return fmt.Errorf("decoded no spec")
	}
	return nil
}

// native is the native-Go baseline of each reconcile the guests run: the same work on the same
// JSON. Whatever encoding the guest reads the Deployment in, the baseline is encoding/json's.
var native = map[string]func() error{
	"noop":                   func() error { return nil },
	"deployment":             nativeDeployment,
	"deployment-json":        nativeDeployment,
	"deployment-hostconvert": nativeDeployment,
	"deployment-generated":   nativeDeployment,
	"deployment-raw":         func() error { return nil },
	"deployment-object":      nativeObject,
	"deployment-object-std":  nativeObject,
	"deployment-fields": func() error {
		var d deploymentFields
		if err := json.Unmarshal(deploymentJSON, &d); err != nil {
			return err
		}
		if d.Spec.Replicas != 3 || len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].Image == "" {
			return fmt.Errorf("decoded %+v", d)
		}
		return nil
	},
}

// deploymentFields is what "deployment-fields" reads of a Deployment (the Go guest's type).
type deploymentFields struct {
	Spec struct {
		Replicas int32 `json:"replicas"`
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// BenchmarkReconcile runs one reconcile through the wasm runtime (C and Go guests) and the same
// work natively, in one run, so their ratio is on one machine at one moment. "interruptible"
// compiles with interruption on and gives each call a deadline, as the controller's per-reconcile
// timeout does; "plain" has neither. The work: "noop" is a key-only reconcile (the cost of the
// call itself); "deployment" gets a 2 KiB Deployment from the host and decodes all of it into
// appsv1.Deployment (Go only: C has no such type), which GetInto asks for in protobuf, the
// host's encoding made already; "deployment-hostconvert" is the same with the host making the
// protobuf from the JSON on each call (its first get of an object), in the figure;
// "deployment-json" decodes it into appsv1.Deployment from JSON (a type without the protobuf
// methods, as GetInto decoded every type before protobuf); "deployment-generated" decodes it
// from JSON into the generated appsv1.Deployment of sdk/go/k8s, through package client, and
// "deployment-raw" gets it and decodes nothing (its baseline is nothing at all);
// "deployment-object" is Client.Get,
// the Deployment as an untyped Object (a map[string]any), and "deployment-object-std" the same
// decoded by encoding/json; "deployment-fields" gets it and reads spec.replicas and the first
// container's image (C with the SDK's JSON lookups, Go and native into a struct of those
// fields). Each native baseline is encoding/json's decode of the JSON, into the same type, and
// x-native is a guest's time over it. "go-typed" (typed-go) runs noop, deployment-raw and
// deployment-generated in a module as a typed plugin builds it, without k8s.io: bench-go's
// k8s.io/api leaves a large live heap its collector marks over and over, which a typed plugin
// does not have.
func BenchmarkReconcile(b *testing.B) {
	e := engine(b)
	guests := map[string][]byte{"c": module(b, "testguests", "benchc"), "go": module(b, "testguests", "bench-go"), "go-typed": module(b, "testguests", "typed-go")}
	nativeNs := map[string]float64{} // work/mode: the native baseline's ns/op, for the guests' x-native
	for _, work := range []string{"noop", "deployment", "deployment-hostconvert", "deployment-json", "deployment-generated", "deployment-raw", "deployment-object", "deployment-object-std", "deployment-fields"} {
		for _, mode := range []string{"plain", "interruptible"} {
			interruptible := mode == "interruptible"
			b.Run(fmt.Sprintf("%s/native/%s", work, mode), func(b *testing.B) {
				ctx := context.Background()
				for b.Loop() {
					callCtx, cancel := ctx, context.CancelFunc(func() {})
					if interruptible {
						callCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
					}
					err := native[work]()
					_ = callCtx
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
				nativeNs[work+"/"+mode] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
			for _, lang := range []string{"c", "go", "go-typed"} {
				if lang == "c" && strings.HasPrefix(work, "deployment") && work != "deployment-fields" {
					continue
				}
				if lang == "go-typed" && work != "noop" && work != "deployment-raw" && work != "deployment-generated" {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/%s", work, lang, mode), func(b *testing.B) {
					m := compile(b, e, guests[lang], wasm.Options{Name: "bench-" + lang, Interruptible: &interruptible})
					call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: work}, Host: cannedHost{convert: work == "deployment-hostconvert"}, Logger: logr.Discard()}
					ctx := context.Background()
					for b.Loop() {
						callCtx, cancel := ctx, context.CancelFunc(func() {})
						if interruptible {
							callCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
						}
						res, err := m.Reconcile(callCtx, call)
						cancel()
						if err != nil || res.Failed {
							b.Fatalf("%+v, %v", res, err)
						}
					}
					idle, mem := m.Instances()
					b.ReportMetric(float64(mem)/float64(max(idle, 1)), "B/instance")
					if n := nativeNs[work+"/"+mode]; n > 0 && work != "noop" && work != "deployment-raw" {
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "x-native")
					}
				})
			}
		}
	}
}

// BenchmarkColdStart measures compiling a module and making its first instance (what a plugin
// load costs) with and without the on-disk compilation cache, for the ~17 MB Go guest (k8s.io/api
// imported) and the C guest.
func BenchmarkColdStart(b *testing.B) {
	for _, guest := range []struct{ name, dir, file string }{{"go-17MB", "testguests", "bench-go"}, {"c", "testguests", "benchc"}} {
		wasmBytes := module(b, guest.dir, guest.file)
		for _, cache := range []string{"no-cache", "warm-cache"} {
			b.Run(guest.name+"/"+cache, func(b *testing.B) {
				dir := "-"
				if cache == "warm-cache" {
					dir = b.TempDir()
					warm, _ := wasm.NewEngine(wasm.EngineOptions{CacheDir: dir})
					compile(b, warm, wasmBytes, wasm.Options{Name: "warmup"}).Close(context.Background())
					warm.Close(context.Background())
				}
				for b.Loop() {
					e, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: dir})
					if err != nil {
						b.Fatal(err)
					}
					m, err := e.Compile(context.Background(), wasmBytes, wasm.Options{Name: guest.name})
					if err != nil {
						b.Fatal(err)
					}
					m.Close(context.Background())
					e.Close(context.Background())
				}
				b.ReportMetric(float64(len(wasmBytes))/(1<<20), "MiB-module")
			})
		}
	}
}

// withCustomSection appends a custom section to a module: still the same code, a new digest,
// so nothing can come from a compilation cache.
func withCustomSection(wasmBytes []byte, tag string) []byte {
	name := "wasmrec-bench"
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, tag...)
	out := append([]byte(nil), wasmBytes...)
	out = append(out, 0)       // custom section id
	for n := len(payload); ; { // size, unsigned LEB128
		b := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			out = append(out, b|0x80)
			continue
		}
		out = append(out, b)
		break
	}
	return append(out, payload...)
}

// BenchmarkSwapToFirstReconcile measures what a hot swap costs between a new module becoming
// available and the first reconcile on it: compile (through the compilation cache), check,
// first instance (Compile does all three), then a reconcile. "kept" swaps back to a version
// the plugin kept compiled (retired, then reactivated: only a new instance); "warm" compiles a
// digest the compilation cache has seen; "cold" gives every swap a new digest. The registry pull and the queue hop are not included: the e2e test
// TestPluginFromRegistry reports the whole path.
func BenchmarkSwapToFirstReconcile(b *testing.B) {
	for _, guest := range []struct{ name, file string }{{"c", "benchc"}, {"go-17MB", "bench-go"}} {
		base := module(b, "testguests", guest.file)
		b.Run(guest.name+"/kept", func(b *testing.B) {
			e := engine(b)
			mods := []*wasm.Module{
				compile(b, e, withCustomSection(base, "k1"), wasm.Options{Name: guest.name}),
				compile(b, e, withCustomSection(base, "k2"), wasm.Options{Name: guest.name}),
			}
			call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "noop"}, Logger: logr.Discard()}
			cur := 0
			for b.Loop() {
				if err := mods[cur].Retire(context.Background()); err != nil {
					b.Fatal(err)
				}
				cur = 1 - cur
				mods[cur].Reactivate()
				if _, err := mods[cur].Reconcile(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, cache := range []string{"warm", "cold"} {
			b.Run(guest.name+"/"+cache, func(b *testing.B) {
				e := engine(b)
				versions := [][]byte{withCustomSection(base, "v1"), withCustomSection(base, "v2")}
				if cache == "warm" {
					for _, v := range versions {
						compile(b, e, v, wasm.Options{Name: "warmup"}).Close(context.Background())
					}
				}
				call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "noop"}, Logger: logr.Discard()}
				var old *wasm.Module
				i := 0
				for b.Loop() {
					next := versions[i%2]
					if cache == "cold" {
						next = withCustomSection(base, fmt.Sprint("cold-", i))
					}
					i++
					m, err := e.Compile(context.Background(), next, wasm.Options{Name: guest.name})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Reconcile(context.Background(), call); err != nil {
						b.Fatal(err)
					}
					if old != nil {
						old.Close(context.Background())
					}
					old = m
				}
				if old != nil {
					old.Close(context.Background())
				}
			})
		}
	}
}

// emptyExport is a module exporting one function that does nothing: (func (export "f")).
var emptyExport = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // types: () -> ()
	0x03, 0x02, 0x01, 0x00, // functions: type 0
	0x07, 0x05, 0x01, 0x01, 'f', 0x00, 0x00, // exports: "f" = func 0
	0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: empty body
}

// BenchmarkWazeroCallFloor calls an empty export with wazero alone, plain and interruptible
// (with a deadline, as BenchmarkReconcile's "interruptible"): the part of a reconcile's cost that
// is wazero's, not wasmrec's. With interruption wazero starts a goroutine per call to watch the
// context; that goroutine is most of the interruptible overhead.
func BenchmarkWazeroCallFloor(b *testing.B) {
	for _, interruptible := range []bool{false, true} {
		name := "plain"
		if interruptible {
			name = "interruptible"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(interruptible))
			defer r.Close(ctx)
			mod, err := r.Instantiate(ctx, emptyExport)
			if err != nil {
				b.Fatal(err)
			}
			f := mod.ExportedFunction("f")
			for b.Loop() {
				callCtx, cancel := ctx, context.CancelFunc(func() {})
				if interruptible {
					callCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
				}
				err := f.CallWithStack(callCtx, nil)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewInstance measures what a reconcile costs when it needs a new instance (the first
// after the pool shrank to zero, or after a trap): every reconcile here replaces its instance
// (RecycleAbove of one byte). "snapshot" starts each from a copy of the first one's state after
// _initialize, "init" runs _initialize in each, as a module that cannot be snapshotted does.
func BenchmarkNewInstance(b *testing.B) {
	e := engine(b)
	for _, guest := range []struct{ name, file string }{{"go-17MB", "bench-go"}, {"go", "hash-go"}, {"c", "benchc"}} {
		wasmBytes := module(b, "testguests", guest.file)
		for _, mode := range []string{"init", "snapshot"} {
			b.Run(guest.name+"/"+mode, func(b *testing.B) {
				snapshots := mode == "snapshot"
				m := compile(b, e, wasmBytes, wasm.Options{Name: "bench-" + guest.name, RecycleAbove: 1, Snapshots: &snapshots})
				call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "noop"}, Host: cannedHost{}, Logger: logr.Discard()}
				for b.Loop() {
					if res, err := m.Reconcile(context.Background(), call); err != nil || res.Failed {
						b.Fatalf("%+v, %v", res, err)
					}
				}
				if got := m.Stats().FromSnapshot > 0; got != snapshots {
					b.Fatalf("instances from a snapshot: %d, want some: %t", m.Stats().FromSnapshot, snapshots)
				}
			})
		}
	}
}

// BenchmarkWakeAtOnce measures the host's part of waking n idle plugins with one change: n
// modules of the typed Go guest whose instances were all closed, each reconciling once at the
// same moment. It reports when the last reconcile ended; e2e BenchmarkIdleDensity measures the
// whole path, with the informers and the queue.
func BenchmarkWakeAtOnce(b *testing.B) {
	e := engine(b)
	wasmBytes := module(b, "testguests", "bench-go")
	for _, n := range []int{1, 10} {
		for _, mode := range []string{"init", "snapshot"} {
			b.Run(fmt.Sprintf("plugins=%d/%s", n, mode), func(b *testing.B) {
				snapshots := mode == "snapshot"
				mods := make([]*wasm.Module, n)
				for i := range mods {
					mods[i] = compile(b, e, wasmBytes, wasm.Options{Name: fmt.Sprintf("bench-%d", i), Snapshots: &snapshots})
				}
				call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "noop"}, Host: cannedHost{}, Logger: logr.Discard()}
				var last time.Duration
				for b.Loop() {
					b.StopTimer()
					for _, m := range mods {
						_ = m.Retire(context.Background())
						m.Reactivate()
					}
					runtime.GC()
					b.StartTimer()
					start := time.Now()
					var wg sync.WaitGroup
					for _, m := range mods {
						wg.Go(func() {
							if res, err := m.Reconcile(context.Background(), call); err != nil || res.Failed {
								b.Errorf("%+v, %v", res, err)
							}
						})
					}
					wg.Wait()
					last = time.Since(start)
				}
				b.ReportMetric(float64(last.Microseconds())/1000, "ms-last")
			})
		}
	}
}

// askedHost is cannedHost that keeps the requests of the calls.
type askedHost struct {
	cannedHost
	asked []string
}

func (h *askedHost) Call(ctx context.Context, fn string, body []byte) (abi.Status, []byte) {
	h.asked = append(h.asked, string(body))
	return h.cannedHost.Call(ctx, fn, body)
}

// The Go guest of the benchmarks reads a Deployment into appsv1.Deployment from protobuf, and
// from JSON, into the same object (the guest checks its kind and containers): what
// BenchmarkReconcile measures is work that succeeds.
func TestTheGoGuestReadsADeploymentInProtobufAndJSON(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "bench-go"), wasm.Options{Name: "bench-go"})
	for _, tc := range []struct{ work, encoding string }{
		{"deployment", `"encoding":"protobuf"`},
		{"deployment-hostconvert", `"encoding":"protobuf"`},
		{"deployment-json", ""},
		{"deployment-object", ""},
		{"deployment-object-std", ""},
	} {
		h := &askedHost{cannedHost: cannedHost{convert: tc.work == "deployment-hostconvert"}}
		res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "bench", Name: tc.work}, Host: h, Logger: logr.Discard()})
		if err != nil || res.Failed {
			t.Fatalf("%s: %+v, %v", tc.work, res, err)
		}
		if len(h.asked) != 1 || strings.Contains(h.asked[0], `"encoding"`) != (tc.encoding != "") || !strings.Contains(h.asked[0], tc.encoding) {
			t.Errorf("%s: asked %q; want one get, with %s", tc.work, h.asked, cmp.Or(tc.encoding, "no encoding"))
		}
	}
}

// BenchmarkRecordedReconcile is BenchmarkReconcile's "deployment-generated" reconcile of the Go
// guest with the module recording (Options.Record: every step captured, as a plugin that
// records does) and without, and the events a step holds.
func BenchmarkRecordedReconcile(b *testing.B) {
	e := engine(b)
	guest := module(b, "testguests", "bench-go")
	for _, record := range []bool{false, true} {
		b.Run(fmt.Sprintf("record=%v", record), func(b *testing.B) {
			m := compile(b, e, guest, wasm.Options{Name: "bench-go", Record: record})
			events := 0
			for b.Loop() {
				call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "deployment-generated"}, Host: cannedHost{}, Logger: logr.Discard()}
				if _, err := m.Reconcile(context.Background(), call); err != nil {
					b.Fatal(err)
				}
				if call.Step != nil {
					events = len(call.Step.Events)
				}
			}
			b.ReportMetric(float64(events), "events/reconcile")
		})
	}
}
