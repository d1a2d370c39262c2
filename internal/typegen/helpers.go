package main

// handWritten is what k8s.io/api writes by hand beside its generated types and controllers
// call, by the package it is in: the generated types carry it too (a file written by hand into
// sdk/go/k8s would be lost at the next generation). Its imports are named as the generated
// files name them.
var handWritten = map[string]struct {
	imports []string
	code    string
}{
	"k8s.io/api/core/v1": {
		imports: []string{"k8s.io/apimachinery/pkg/api/resource"},
		code: `// Name is the quantity of name in the list, or a zero one in defaultFormat if it has none.
func (rl *ResourceList) Name(name ResourceName, defaultFormat resource.Format) *resource.Quantity {
	if q, ok := (*rl)[name]; ok {
		return &q
	}
	return &resource.Quantity{Format: defaultFormat}
}

// Cpu is the list's CPU, if it has one.
func (rl *ResourceList) Cpu() *resource.Quantity { return rl.Name(ResourceCPU, resource.DecimalSI) }

// Memory is the list's memory, if it has one.
func (rl *ResourceList) Memory() *resource.Quantity {
	return rl.Name(ResourceMemory, resource.BinarySI)
}

// Storage is the list's storage, if it has one.
func (rl *ResourceList) Storage() *resource.Quantity {
	return rl.Name(ResourceStorage, resource.BinarySI)
}

// Pods is the list's pods, if it has them.
func (rl *ResourceList) Pods() *resource.Quantity { return rl.Name(ResourcePods, resource.DecimalSI) }

// StorageEphemeral is the list's ephemeral storage, if it has one.
func (rl *ResourceList) StorageEphemeral() *resource.Quantity {
	return rl.Name(ResourceEphemeralStorage, resource.BinarySI)
}

`,
	},
}
