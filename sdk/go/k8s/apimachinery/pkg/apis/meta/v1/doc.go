// Package v1 holds the metadata every Kubernetes object has (ObjectMeta, TypeMeta, ListMeta,
// OwnerReference), Time, Condition and LabelSelector, as k8s.io/apimachinery/pkg/apis/meta/v1
// does, for wasm plugins: import it where that package was imported. The types are generated
// (zz_generated.*) with reflection-free JSON codecs and deep copies; Time, MicroTime, Duration
// and FieldsV1, whose JSON is their own, and the accessors of Object are written by hand.
package v1
