package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
	wruntime "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
)

// object is what every generated kind is.
type object interface {
	codec.Marshaler
	codec.Unmarshaler
	DeepCopyObject() wruntime.Object
	APIVersionKind() (string, string)
}

type kindPair struct {
	name string
	k8s  func() any
	ours func() object
}

// filler fills k8s.io/api objects with random values that are what an API server could send:
// quantities in canonical form, times to the second (micro for MicroTime), valid raw JSON.
func filler(seed uint64) *randfill.Filler {
	return randfill.NewWithSeed(int64(seed)).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
			_ = q.String() // canonical
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Unix(c.Int63n(4e9), 0).Rfc3339Copy()
		},
		func(t *metav1.MicroTime, c randfill.Continue) {
			*t = metav1.NewMicroTime(time.Unix(c.Int63n(4e9), c.Int63n(1e6)*1e3))
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63n(1e12))
		},
		func(x *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*x = intstr.FromInt32(c.Int31())
			} else {
				*x = intstr.FromString(c.String(8))
			}
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			r.Raw = []byte(fmt.Sprintf(`{"a":%d,"b":[%q]}`, c.Int31(), c.String(5)))
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			f.Raw = []byte(fmt.Sprintf(`{"f:metadata":{"f:name":{}},"x":%d}`, c.Int31()))
		},
	)
}

// TestGeneratedKindsEncodeAsEncodingJSON fills each kind's k8s.io/api type at random, encodes
// it with encoding/json, decodes that with the generated code, and encodes it again: the bytes
// must be encoding/json's, and so must the generated deep copy's.
func TestGeneratedKindsEncodeAsEncodingJSON(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	for _, k := range generatedKinds {
		t.Run(k.name, func(t *testing.T) {
			for i := range rounds {
				orig := k.k8s()
				filler(uint64(i)).Fill(orig)
				want, err := json.Marshal(orig)
				if err != nil {
					t.Fatal(err)
				}
				ours := k.ours()
				if err := codec.Unmarshal(want, ours); err != nil {
					t.Fatalf("decoding %s: %v", want, err)
				}
				got, err := codec.Marshal(ours)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d:\n got %s\nwant %s", i, got, want)
				}
				if std, err := json.Marshal(ours); err != nil || !bytes.Equal(std, want) {
					t.Fatalf("encoding/json encodes the generated type as %s (%v), not as %s", std, err, want)
				}
				copied, err := codec.Marshal(ours.DeepCopyObject().(object))
				if err != nil || !bytes.Equal(copied, want) {
					t.Fatalf("the deep copy encodes as %s (%v), not as %s", copied, err, want)
				}
			}
		})
	}
}

// TestDeepCopySharesNothing changes every pointer, slice and map of a deep copy and checks
// that the original still encodes as before.
func TestDeepCopySharesNothing(t *testing.T) {
	for _, k := range generatedKinds {
		t.Run(k.name, func(t *testing.T) {
			orig := k.k8s()
			filler(7).NilChance(0).NumElements(1, 2).Fill(orig)
			data, _ := json.Marshal(orig)
			ours := k.ours()
			if err := codec.Unmarshal(data, ours); err != nil {
				t.Fatal(err)
			}
			c := ours.DeepCopyObject()
			scribble(reflect.ValueOf(c).Elem())
			after, _ := codec.Marshal(ours)
			if !bytes.Equal(after, data) {
				t.Fatalf("changing the copy changed the original:\n got %s\nwant %s", after, data)
			}
		})
	}
}

// scribble writes over every string, number and []byte reachable from v.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scribble(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString("scribbled")
		}
	case reflect.Int32, reflect.Int64, reflect.Int:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint8:
		if v.CanSet() {
			v.SetUint(v.Uint() + 1)
		}
	}
}

// TestMutatedObjectsDecodeAsKubernetes breaks random objects of every kind in a few random
// bytes (a brace, a quote, a digit where a string was) and decodes them with the generated code
// and with Kubernetes' own decoder: see sameDecode.
func TestMutatedObjectsDecodeAsKubernetes(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(1, 2))
	const tokens = "{}[]\",:0-n1e."
	for i := range n {
		k := generatedKinds[r.IntN(len(generatedKinds))]
		o := k.k8s()
		filler(uint64(i % 50)).Fill(o)
		data, _ := json.Marshal(o)
		for range 1 + r.IntN(3) {
			data[r.IntN(len(data))] = tokens[r.IntN(len(tokens))]
		}
		sameDecode(t, k, data)
	}
}

// FuzzDecodeAsKubernetes is sameDecode on the fuzzer's inputs.
func FuzzDecodeAsKubernetes(f *testing.F) {
	for i, k := range generatedKinds {
		if i%4 != 0 {
			continue
		}
		orig := k.k8s()
		filler(uint64(i)).Fill(orig)
		data, _ := json.Marshal(orig)
		f.Add(uint8(i), data)
	}
	f.Add(uint8(0), []byte(`{"metadata":{"name":"a","labels":{"x":null}},"data":{"k":"v"},"data":null}`))
	f.Add(uint8(0), []byte(`{"spec":{"replicas":1.5}}`))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		sameDecode(t, generatedKinds[int(which)%len(generatedKinds)], data)
	})
}

// sameDecode gives the generated decoder and Kubernetes' own (sigs.k8s.io/json,
// case-sensitive, as client-go and the API server decode) the same bytes: where Kubernetes'
// succeeds, the generated one must, with a value that encodes to what Kubernetes' value decodes
// from; where it fails, the generated one must fail too.
func sameDecode(t *testing.T, k kindPair, data []byte) {
	t.Helper()
	want := k.k8s()
	errK := kubernetesUnmarshal(data, want)
	ours := k.ours()
	errO := codec.Unmarshal(data, ours)
	if errK != nil {
		if errO == nil {
			t.Fatalf("%s: Kubernetes refuses %s (%v); the generated decoder took it", k.name, data, errK)
		}
		return
	}
	if errO != nil {
		t.Fatalf("%s: Kubernetes reads %s; the generated decoder refused it: %v", k.name, data, errO)
	}
	enc, err := codec.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	got := k.k8s()
	if err := json.Unmarshal(enc, got); err != nil {
		t.Fatalf("the generated encoding %s does not decode: %v", enc, err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("%s from %s:\n generated %s\nKubernetes %+v", k.name, data, enc, want)
	}
}
