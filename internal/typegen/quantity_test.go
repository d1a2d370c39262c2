package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	kcorev1 "k8s.io/api/core/v1"
	kres "k8s.io/apimachinery/pkg/api/resource"

	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
)

// TestQuantityIsApimachinerys parses random quantities with both packages and checks that
// every method gives the same answer: what parses, String, the JSON, the numbers out, and the
// results of Cmp, Add, Sub, Mul, Neg and RoundUp with each other.
func TestQuantityIsApimachinerys(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	const n = 20000
	var parsed, wide, failed int
	var ours []resource.Quantity
	var theirs []kres.Quantity
	var texts []string
	for range n {
		s := randomQuantity(rng)
		k, kerr := kres.ParseQuantity(s)
		q, err := resource.ParseQuantity(s)
		if (kerr == nil) != (err == nil) {
			t.Fatalf("ParseQuantity(%q): apimachinery %v, ours %v", s, kerr, err)
		}
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Errorf("ParseQuantity(%q): the error does not name the text: %v", s, err)
			}
			continue
		}
		parsed++
		if isDec(&k) {
			wide++
		}
		compareQuantity(t, "ParseQuantity("+s+")", &q, &k)
		ours, theirs, texts = append(ours, q), append(theirs, k), append(texts, s)
	}
	// Amounts at the edges of int64, and at scales 18 and more apart, mixed into a third of the
	// pairs.
	random := len(ours)
	for _, s := range []string{"999999999999999999", "-999999999999999999", "100000000000000000", "1e19", "-1e19", "9e18", "5E", "-5E", "1e-9", "999999999999999999n", "1n", "-1n", "8Ei", "7Ei", "1023", "-1024", "1024", "9223372036854775807", "-9223372036854775808", "922337203685477580", "0.5Ki", "1.5Gi", "1e-10", "0"} {
		q, k := resource.MustParse(s), kres.MustParse(s)
		ours, theirs, texts = append(ours, q), append(theirs, k), append(texts, s)
	}
	pick := func() int {
		if rng.IntN(3) == 0 {
			return random + rng.IntN(len(ours)-random)
		}
		return rng.IntN(random)
	}
	for i := range 30000 {
		a, b := pick(), pick()
		what := fmt.Sprintf("%s %s", texts[a], texts[b])
		q, k := ours[a].DeepCopy(), theirs[a].DeepCopy()
		y, ky := ours[b], theirs[b]
		if got, want := q.Cmp(y), k.Cmp(ky); got != want {
			t.Fatalf("Cmp(%s) = %d, apimachinery %d", what, got, want)
		}
		if got, want := ours[a].Equal(y), theirs[a].Equal(ky); got != want {
			t.Fatalf("Equal(%s) = %v, apimachinery %v", what, got, want)
		}
		c := rng.Int64N(2001) - 1000
		if got, want := q.CmpInt64(c), k.CmpInt64(c); got != want {
			t.Fatalf("CmpInt64(%s, %d) = %d, apimachinery %d", texts[a], c, got, want)
		}
		switch i % 6 {
		case 0:
			q.Add(y)
			k.Add(ky)
			what = "Add(" + what + ")"
		case 1:
			q.Sub(y)
			k.Sub(ky)
			what = "Sub(" + what + ")"
		case 2:
			m := []int64{0, 1, -1, 3, 1000, 1 << 40, math.MaxInt64}[rng.IntN(7)]
			if got, want := q.Mul(m), k.Mul(m); got != want {
				t.Fatalf("Mul(%s, %d) = %v, apimachinery %v", texts[a], m, got, want)
			}
			what = fmt.Sprintf("Mul(%s, %d)", texts[a], m)
		case 3:
			q.Neg()
			k.Neg()
			what = "Neg(" + texts[a] + ")"
		case 4:
			scale := resource.Scale(rng.IntN(30) - 12)
			if got, want := q.RoundUp(scale), k.RoundUp(kres.Scale(scale)); got != want {
				t.Fatalf("RoundUp(%s, %d) = %v, apimachinery %v", texts[a], scale, got, want)
			}
			what = fmt.Sprintf("RoundUp(%s, %d)", texts[a], scale)
		case 5:
			v := rng.Int64N(1<<20) - 1<<19
			scale := resource.Scale(rng.IntN(30) - 12)
			q.SetScaled(v, scale)
			k.SetScaled(v, kres.Scale(scale))
			what = fmt.Sprintf("SetScaled(%s, %d, %d)", texts[a], v, scale)
		}
		compareQuantity(t, what, &q, &k)
		// And once more on the result, with the other: sums of sums.
		q.Add(y)
		k.Add(ky)
		compareQuantity(t, what+" + "+texts[b], &q, &k)
	}
	for _, c := range []struct {
		v      int64
		scale  resource.Scale
		format resource.Format
	}{{1536, 0, resource.BinarySI}, {-1 << 62, 0, resource.BinarySI}, {5, -12, resource.DecimalSI}, {7, 21, resource.DecimalSI}, {1, 3, resource.DecimalExponent}, {math.MaxInt64, 1, resource.DecimalSI}, {math.MinInt64, 0, resource.BinarySI}} {
		q := resource.NewScaledQuantity(c.v, c.scale)
		q.Format = c.format
		k := kres.NewScaledQuantity(c.v, kres.Scale(c.scale))
		k.Format = kres.Format(c.format)
		compareQuantity(t, fmt.Sprintf("NewScaledQuantity(%d, %d) %s", c.v, c.scale, c.format), q, k)
	}
	// Every pair of amounts at the edges of int64, at scales up to 20 apart, compared.
	var grid []int64
	for _, v := range []int64{1, 9, 10, 11, 999999999999999999, 1e18, 5e18, 9e18, math.MaxInt64} {
		grid = append(grid, v, -v)
	}
	grid = append(grid, 0, math.MinInt64)
	scales := []resource.Scale{-9, -1, 0, 1, 17, 18, 19, 20}
	for _, v := range grid {
		for _, sv := range scales {
			for _, w := range grid {
				for _, sw := range scales {
					q, y := resource.NewScaledQuantity(v, sv), resource.NewScaledQuantity(w, sw)
					k, ky := kres.NewScaledQuantity(v, kres.Scale(sv)), kres.NewScaledQuantity(w, kres.Scale(sw))
					if got, want := q.Cmp(*y), k.Cmp(*ky); got != want {
						t.Fatalf("Cmp(%de%d, %de%d) = %d, apimachinery %d", v, sv, w, sw, got, want)
					}
					q.Add(*y)
					k.Add(*ky)
					compareQuantity(t, fmt.Sprintf("%de%d + %de%d", v, sv, w, sw), q, k)
				}
			}
		}
	}
	t.Logf("%d random texts: %d parsed (%d past an int64 amount), %d refused", n, parsed, wide, failed)
	if wide < n/50 || failed < n/50 || parsed < n/2 {
		t.Errorf("the random texts do not reach every path: %d parsed, %d wide, %d refused", parsed, wide, failed)
	}
}

// isDec reports a quantity apimachinery holds as an inf.Dec: past an int64 amount.
func isDec(k *kres.Quantity) bool {
	return !reflect.ValueOf(k).Elem().FieldByName("d").Field(0).IsNil()
}

// compareQuantity fails t where q and k differ.
func compareQuantity(t *testing.T, what string, q *resource.Quantity, k *kres.Quantity) {
	t.Helper()
	// The numbers first: String caches.
	type figures struct {
		Sign, CmpZero              int
		IsZero                     bool
		Value, Milli, Nano, Kilo   int64
		Int                        int64
		IntOK                      bool
		Float                      float64
		Format                     string
		Canonical, CanonicalSuffix string
	}
	kc, ks := k.CanonicalizeBytes(nil)
	want := figures{k.Sign(), k.CmpInt64(0), k.IsZero(), k.Value(), k.MilliValue(), k.ScaledValue(kres.Nano), k.ScaledValue(kres.Kilo), 0, false, k.AsApproximateFloat64(), string(k.Format), string(kc), string(ks)}
	want.Int, want.IntOK = k.AsInt64()
	qc, qs := q.CanonicalizeBytes(nil)
	got := figures{q.Sign(), q.CmpInt64(0), q.IsZero(), q.Value(), q.MilliValue(), q.ScaledValue(resource.Nano), q.ScaledValue(resource.Kilo), 0, false, q.AsApproximateFloat64(), string(q.Format), string(qc), string(qs)}
	got.Int, got.IntOK = q.AsInt64()
	if math.IsNaN(want.Float) && math.IsNaN(got.Float) {
		got.Float = want.Float
	}
	if got != want {
		t.Fatalf("%s:\n ours         %+v\n apimachinery %+v", what, got, want)
	}
	wantString, wantJSON := k.String(), mustJSON(t, k)
	if got := q.String(); got != wantString {
		t.Fatalf("%s: String() = %q, want %q", what, got, wantString)
	}
	if got := mustJSON(t, q); got != wantJSON {
		t.Fatalf("%s: JSON %s, want %s", what, got, wantJSON)
	}
	var back resource.Quantity
	if err := json.Unmarshal([]byte(wantJSON), &back); err != nil {
		t.Fatalf("%s: reading back %s: %v", what, wantJSON, err)
	}
	var kback kres.Quantity
	if err := json.Unmarshal([]byte(wantJSON), &kback); err != nil {
		t.Fatalf("%s: apimachinery reading back %s: %v", what, wantJSON, err)
	}
	bc, bs := back.CanonicalizeBytes(nil)
	kc, ks = kback.CanonicalizeBytes(nil)
	if string(bc)+string(bs) != string(kc)+string(ks) {
		t.Fatalf("%s: %s reads back as %s%s, apimachinery %s%s", what, wantJSON, bc, bs, kc, ks)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// randomQuantity is a quantity's text as users write them, and many they should not: signs,
// leading zeros, long and short numbers, points with no digits, every suffix, exponents large
// and small, and stray characters.
func randomQuantity(rng *rand.Rand) string {
	var b strings.Builder
	switch rng.IntN(8) {
	case 0:
		b.WriteByte('-')
	case 1:
		b.WriteByte('+')
	}
	if rng.IntN(6) == 0 {
		b.WriteString(strings.Repeat("0", rng.IntN(4)))
	}
	digits := func(max int) {
		for range rng.IntN(max + 1) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	switch rng.IntN(10) {
	case 0:
		digits(30) // past int64
	case 1:
		digits(0)
	default:
		digits(6)
	}
	if rng.IntN(3) == 0 {
		b.WriteByte('.')
		if rng.IntN(8) == 0 {
			digits(25)
		} else {
			digits(4)
		}
	}
	suffixes := []string{"", "", "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e", "E", "i", "KiB", "mm"}
	switch s := suffixes[rng.IntN(len(suffixes))]; s {
	case "e", "E":
		b.WriteString(s)
		switch rng.IntN(4) {
		case 0:
			b.WriteByte('-')
		case 1:
			b.WriteByte('+')
		}
		fmt.Fprint(&b, []int{0, 1, 2, 3, 5, 9, 10, 12, 18, 19, 20, 25, 40}[rng.IntN(13)])
	default:
		b.WriteString(s)
	}
	if rng.IntN(60) == 0 {
		b.WriteString([]string{"x", ".", " ", "e", "1e"}[rng.IntN(5)])
	}
	return b.String()
}

// ResourceList's helpers answer as k8s.io/api's, for a list with the resource and without.
func TestResourceListHelpersAreKubernetes(t *testing.T) {
	for _, list := range []map[string]string{{"cpu": "1500m", "memory": "1.5Gi", "storage": "10G", "pods": "110", "ephemeral-storage": "2Ti"}, {}} {
		ours, theirs := corev1.ResourceList{}, kcorev1.ResourceList{}
		for name, q := range list {
			ours[corev1.ResourceName(name)] = resource.MustParse(q)
			theirs[kcorev1.ResourceName(name)] = kres.MustParse(q)
		}
		for _, c := range []struct {
			name   string
			ours   *resource.Quantity
			theirs *kres.Quantity
		}{
			{"Cpu", ours.Cpu(), theirs.Cpu()},
			{"Memory", ours.Memory(), theirs.Memory()},
			{"Storage", ours.Storage(), theirs.Storage()},
			{"Pods", ours.Pods(), theirs.Pods()},
			{"StorageEphemeral", ours.StorageEphemeral(), theirs.StorageEphemeral()},
			{"Name", ours.Name("example.com/gpu", resource.DecimalExponent), theirs.Name("example.com/gpu", kres.DecimalExponent)},
		} {
			if got, want := c.ours.String()+" "+string(c.ours.Format), c.theirs.String()+" "+string(c.theirs.Format); got != want {
				t.Errorf("%v.%s() = %s, k8s.io/api %s", list, c.name, got, want)
			}
		}
	}
}
