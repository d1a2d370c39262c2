package v1

import (
	batchv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/batch/v1"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/util/intstr"
)

// Priority says which orders are filled first.
type Priority string

const (
	PriorityLow  Priority = "Low"
	PriorityHigh Priority = "High"
)

// Labels is a named map.
type Labels map[string]string

// Lines is a named slice of a struct.
type Lines []Line

// Line is one item of an order.
type Line struct {
	SKU      string            `json:"sku"`
	Count    int32             `json:"count"`
	Price    resource.Quantity `json:"price,omitzero"`
	Gift     *bool             `json:"gift,omitempty"`
	Note     string            `json:"note,omitempty"`
	Discount *Discount         `json:"discount,omitempty"`
}

// Discount is a local struct held by pointer.
type Discount struct {
	Percent float64 `json:"percent"`
	Code    string  `json:"code,omitempty"`
}

// Address has no reference fields: its deep copy is an assignment, and omitzero compares it.
type Address struct {
	Street string `json:"street,omitempty"`
	Zip    int    `json:"zip,omitempty"`
}

// OrderSpec is what is ordered.
type OrderSpec struct {
	Customer     string                    `json:"customer"`
	Priority     Priority                  `json:"priority,omitempty"`
	Lines        Lines                     `json:"lines,omitempty"`
	Tags         Labels                    `json:"tags,omitempty"`
	Attachments  map[string][]byte         `json:"attachments,omitempty"`
	Signature    []byte                    `json:"signature,omitempty"`
	DeliverBy    *metav1.Time              `json:"deliverBy,omitempty"`
	Retries      *int64                    `json:"retries,omitempty"`
	Budget       uint64                    `json:"budget,omitempty"`
	Ship         Address                   `json:"ship,omitzero"`
	Window       intstr.IntOrString        `json:"window,omitempty"`
	Packing      batchv1.JobTemplateSpec   `json:"packing"`
	Resources    corev1.ResourceList       `json:"resources,omitempty"`
	Policy       corev1.PullPolicy         `json:"policy,omitempty"`
	Selector     *metav1.LabelSelector     `json:"selector,omitempty"`
	Nested       map[string]map[string]int `json:"nested,omitempty"`
	Internal     string                    `json:"-"`
	unexported   chan int
	DefaultNamed string
}

// OrderStatus is what happened to it.
type OrderStatus struct {
	Filled     []corev1.ObjectReference `json:"filled,omitempty"`
	LastFilled *metav1.Time             `json:"lastFilled,omitempty"`
	Conditions []metav1.Condition       `json:"conditions,omitempty"`
	Shelf      *ShelfRef                `json:"shelf,omitempty"`
}

// ShelfRef points at a Shelf.
type ShelfRef struct {
	Name string `json:"name"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status

// Order is a kind.
type Order struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	Spec   OrderSpec   `json:"spec"`
	Status OrderStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// OrderList is a list of Orders.
type OrderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []Order `json:"items"`
}

// +kubebuilder:object:generate=false

// helper is not part of the API: it is left alone.
type helper struct {
	f func()
}

func init() { register(&Order{}, &OrderList{}) }
