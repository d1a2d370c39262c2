package v1

import "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"

// Written by hand, as in k8s.io/api: ResourceList's helpers.

// Name is the quantity of name in the list, or a zero one in defaultFormat if it has none.
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
