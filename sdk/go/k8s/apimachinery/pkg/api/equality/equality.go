package equality

import (
	"reflect"

	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

// Semantic says whether two objects mean the same to the API server: as reflect.DeepEqual,
// except that a nil slice or map equals an empty one (both are left out of the object's JSON,
// or stored the same), two Quantities are compared by Equal, and two Times and MicroTimes by
// the instant they name, whatever their location.
var Semantic Equalities

// Equalities is Semantic's type.
type Equalities struct{}

var (
	quantityType  = reflect.TypeFor[resource.Quantity]()
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
)

// DeepEqual reports whether a and b are semantically equal. Values of different types never
// are.
func (Equalities) DeepEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	return deepEqual(va, vb, map[visit]bool{})
}

// visit is a pair of pointers compared already, or being compared: a cycle ends there.
type visit struct {
	a, b uintptr
	t    reflect.Type
}

func deepEqual(a, b reflect.Value, visited map[visit]bool) bool {
	if a.CanInterface() && b.CanInterface() { // an unexported field's is compared as it is made
		switch a.Type() {
		case quantityType:
			return a.Interface().(resource.Quantity).Equal(b.Interface().(resource.Quantity))
		case timeType:
			return a.Interface().(metav1.Time).Time.Equal(b.Interface().(metav1.Time).Time)
		case microTimeType:
			return a.Interface().(metav1.MicroTime).Time.Equal(b.Interface().(metav1.MicroTime).Time)
		}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if a.Kind() != reflect.Pointer && a.Len() == 0 && b.Len() == 0 {
			return true // nil and empty alike
		}
		if a.IsNil() || b.IsNil() {
			return a.IsNil() && b.IsNil()
		}
		if a.UnsafePointer() == b.UnsafePointer() && (a.Kind() != reflect.Slice || a.Len() == b.Len()) {
			return true
		}
		v := visit{uintptr(a.UnsafePointer()), uintptr(b.UnsafePointer()), a.Type()}
		if visited[v] {
			return true
		}
		visited[v] = true
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return deepEqual(a.Elem(), b.Elem(), visited)
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !deepEqual(a.Index(i), b.Index(i), visited) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !deepEqual(it.Value(), bv, visited) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !deepEqual(a.Field(i), b.Field(i), visited) {
				return false
			}
		}
		return true
	case reflect.Func:
		return a.IsNil() && b.IsNil() // as reflect.DeepEqual: funcs are equal only if both nil
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	case reflect.String:
		return a.String() == b.String()
	}
	return a.Kind() == b.Kind() && a.CanInterface() && b.CanInterface() && reflect.DeepEqual(a.Interface(), b.Interface()) // chans, unsafe pointers
}
