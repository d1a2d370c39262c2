package v1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/util/intstr"
)

func full() *Order {
	yes, retries := true, int64(3)
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &Order{
		TypeMeta:   metav1.TypeMeta{APIVersion: "shop.example.com/v1", Kind: "Order"},
		ObjectMeta: metav1.ObjectMeta{Name: "o1", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: OrderSpec{
			Customer: "ann", Priority: PriorityHigh,
			Lines: Lines{{SKU: "x", Count: 2, Price: resource.MustParse("1500m"), Gift: &yes,
				Discount: &Discount{Percent: 12.5, Code: "W"}}, {SKU: "y"}},
			Tags:        Labels{"k": "v"},
			Attachments: map[string][]byte{"a": []byte("hi")},
			Signature:   []byte{0, 1, 2},
			DeliverBy:   &at, Retries: &retries, Budget: 1 << 60,
			Ship:      Address{Street: "Main", Zip: 12345},
			Window:    intstr.FromString("25%"),
			Resources: corev1.ResourceList{"cpu": resource.MustParse("2")},
			Policy:    corev1.PullAlways,
			Selector:  &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Nested:    map[string]map[string]int{"n": {"m": 1}},
			Internal:  "not encoded", DefaultNamed: "named by Go",
		},
		Status: OrderStatus{
			Filled:     []corev1.ObjectReference{{Kind: "Job", Name: "j"}},
			LastFilled: &at,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: "Done"}},
			Shelf:      &ShelfRef{Name: "s"},
		},
	}
}

func TestEncodeAsEncodingJSON(t *testing.T) {
	for name, o := range map[string]*Order{"full": full(), "zero": {}} {
		got, err := codec.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: generated encoding\n%s\nencoding/json\n%s", name, got, want)
		}
	}
}

func TestDecodeAsEncodingJSON(t *testing.T) {
	data, err := json.Marshal(full())
	if err != nil {
		t.Fatal(err)
	}
	var got, want Order
	if err := codec.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, &want) {
		t.Errorf("generated decode\n%+v\nencoding/json\n%+v", got, want)
	}
	var list OrderList
	if err := codec.Unmarshal([]byte(`{"items":[`+string(data)+`]}`), &list); err != nil || len(list.Items) != 1 || list.Items[0].Spec.Customer != "ann" {
		t.Errorf("list: %v %+v", err, list)
	}
}

func TestDeepCopySharesNothing(t *testing.T) {
	o := full()
	c := o.DeepCopyObject().(*Order)
	if !reflect.DeepEqual(o, c) {
		t.Fatal("the copy differs")
	}
	c.Spec.Lines[0].Discount.Percent = 1
	*c.Spec.Lines[0].Gift = false
	c.Spec.Tags["k"] = "changed"
	c.Spec.Attachments["a"][0] = 'X'
	c.Spec.Signature[0] = 9
	c.Spec.Nested["n"]["m"] = 7
	c.Spec.Packing.Spec.Template.Spec.Containers = append(c.Spec.Packing.Spec.Template.Spec.Containers, corev1.Container{Name: "c"})
	c.Status.Filled[0].Name = "changed"
	c.Labels["a"] = "changed"
	if !reflect.DeepEqual(o, full()) {
		t.Error("changing the copy changed the original")
	}
	if av, k := c.APIVersionKind(); av != "shop.example.com/v1" || k != "Order" {
		t.Errorf("APIVersionKind = %q, %q", av, k)
	}
	if len(registered) != 2 {
		t.Errorf("registered %d kinds", len(registered))
	}
}
