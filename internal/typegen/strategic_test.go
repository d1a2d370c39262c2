package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/randfill"

	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// TestStrategicMergeFromIsKubernetesPatch fills each kind at random, changes a copy at random
// (members set, cleared and changed, list items added, removed, changed and moved), and
// computes the strategic merge patch from one to the other twice: with the generated types
// and client.StrategicMergeFrom, and with Kubernetes' strategicpatch on k8s.io/api's types
// (what controller-runtime's StrategicMergeFrom calls). Both must fail, or both make the same
// patch, numbers to the last digit.
func TestStrategicMergeFromIsKubernetesPatch(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 8
	}
	seen := map[string]int{} // the directives of the patches made
	for _, k := range generatedKinds {
		if _, ok := k.ours().(client.Object); !ok {
			continue // a list
		}
		t.Run(k.name, func(t *testing.T) {
			var patched, failed int
			for i := range rounds {
				orig := k.k8s()
				filler(uint64(i)).Fill(orig)
				origJSON, _ := json.Marshal(orig)
				mod := k.k8s()
				_ = json.Unmarshal(origJSON, mod)
				r := rand.New(rand.NewPCG(uint64(i), 7))
				mutate(reflect.ValueOf(mod).Elem(), r, filler(uint64(i)+1000), 0)
				modJSON, _ := json.Marshal(mod)

				want, errK := strategicpatch.CreateTwoWayMergePatch(origJSON, modJSON, k.k8s())
				a, b := k.ours(), k.ours()
				if err := codec.Unmarshal(origJSON, a); err != nil {
					t.Fatal(err)
				}
				if err := codec.Unmarshal(modJSON, b); err != nil {
					t.Fatal(err)
				}
				got, errO := client.StrategicMergeFrom(a.(client.Object)).Data(b.(client.Object))
				if errK != nil {
					if errO == nil {
						t.Fatalf("round %d: Kubernetes refuses (%v); ours made %s\nfrom %s\n  to %s", i, errK, got, origJSON, modJSON)
					}
					failed++
					continue
				}
				if errO != nil {
					t.Fatalf("round %d: Kubernetes made %s; ours failed: %v\nfrom %s\n  to %s", i, want, errO, origJSON, modJSON)
				}
				w, _ := exactJSON(want)
				g, err := exactJSON(got)
				if err != nil {
					t.Fatalf("round %d: our patch %s: %v", i, got, err)
				}
				if !reflect.DeepEqual(w, g) {
					t.Fatalf("round %d: the patches differ at %s\n ours %s\nwant %s\nfrom %s\n  to %s", i, firstDiff(g, w, ""), got, want, origJSON, modJSON)
				}
				for _, d := range []string{`"$setElementOrder/`, `"$deleteFromPrimitiveList/`, `"$retainKeys"`, `"$patch":"delete"`} {
					seen[d] += bytes.Count(got, []byte(d))
				}
				if len(g.(map[string]any)) > 0 {
					patched++
				}
			}
			if patched < rounds/2 {
				t.Errorf("only %d of %d rounds made a patch (%d refused by both): the test does not test", patched, rounds, failed)
			}
		})
	}
	for d, n := range seen {
		if n == 0 {
			t.Errorf("no patch held %s: the test does not test it", d)
		}
	}
	t.Logf("directives in the patches: %v", seen)
}

// firstDiff is the path of a place where a and b differ.
func firstDiff(a, b any, path string) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k := range am {
			if !reflect.DeepEqual(am[k], bm[k]) {
				return firstDiff(am[k], bm[k], path+"."+k)
			}
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				return path + "." + k + " (only in the second)"
			}
		}
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			if !reflect.DeepEqual(al[i], bl[i]) {
				return firstDiff(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return fmt.Sprintf("%s: %s, not %s", path, ja, jb)
}

// exactJSON decodes data with numbers as their text.
func exactJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// mutate changes v at random, in place: scalars changed, pointers set or cleared, list items
// dropped, added, changed and swapped, map entries dropped and added.
func mutate(v reflect.Value, r *rand.Rand, f *randfill.Filler, depth int) {
	if depth > 14 {
		return
	}
	if v.CanAddr() && isSpecialValue(v.Type()) {
		if r.IntN(6) == 0 {
			f.Fill(v.Addr().Interface())
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		switch {
		case v.IsNil():
			if r.IntN(8) == 0 {
				n := reflect.New(v.Type().Elem())
				f.Fill(n.Interface())
				v.Set(n)
			}
		case r.IntN(10) == 0:
			v.Set(reflect.Zero(v.Type()))
		default:
			mutate(v.Elem(), r, f, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutate(v.Field(i), r, f, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if r.IntN(6) == 0 {
				f.Fill(v.Addr().Interface())
			}
			return
		}
		n := v.Len()
		if n > 0 && r.IntN(4) == 0 { // drop one
			i := r.IntN(n)
			s := reflect.AppendSlice(v.Slice(0, i), v.Slice(i+1, n))
			c := reflect.MakeSlice(v.Type(), s.Len(), s.Len())
			reflect.Copy(c, s)
			v.Set(c)
		}
		if r.IntN(4) == 0 { // add one
			e := reflect.New(v.Type().Elem())
			f.Fill(e.Interface())
			v.Set(reflect.Append(v, e.Elem()))
		}
		if v.Len() > 1 && r.IntN(5) == 0 { // swap two
			i, j := r.IntN(v.Len()), r.IntN(v.Len())
			a, b := reflect.ValueOf(v.Index(i).Interface()), reflect.ValueOf(v.Index(j).Interface())
			v.Index(i).Set(b)
			v.Index(j).Set(a)
		}
		for i := range v.Len() {
			if r.IntN(2) == 0 {
				mutate(v.Index(i), r, f, depth+1)
			}
		}
	case reflect.Map:
		if v.IsNil() {
			if r.IntN(8) == 0 {
				n := reflect.New(v.Type())
				f.Fill(n.Interface())
				v.Set(n.Elem())
			}
			return
		}
		keys := v.MapKeys()
		if len(keys) > 0 && r.IntN(4) == 0 {
			v.SetMapIndex(keys[r.IntN(len(keys))], reflect.Value{})
		}
		if r.IntN(4) == 0 {
			k, e := reflect.New(v.Type().Key()), reflect.New(v.Type().Elem())
			f.Fill(k.Interface())
			f.Fill(e.Interface())
			v.SetMapIndex(k.Elem(), e.Elem())
		}
		for _, k := range v.MapKeys() {
			if r.IntN(3) == 0 {
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				mutate(e, r, f, depth+1)
				v.SetMapIndex(k, e)
			}
		}
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64, reflect.Uint64:
		if v.CanSet() && r.IntN(8) == 0 {
			f.Fill(v.Addr().Interface())
		}
	}
}

// isSpecialValue is a type written by hand (a Quantity, a Time), changed whole.
func isSpecialValue(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && isSpecial(t)
}
