package resource_test

import (
	"fmt"

	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
)

func ExampleQuantity() {
	limit := resource.MustParse("1.5Gi")
	used := resource.MustParse("1000Mi")
	used.Add(resource.MustParse("512Mi"))

	fmt.Println(limit.String(), used.String(), used.Cmp(limit), used.Equal(resource.MustParse("1512Mi")))
	cpu, tenth := resource.MustParse("1500m"), resource.MustParse("0.1")
	fmt.Println(cpu.Value(), tenth.MilliValue())
	// Output:
	// 1536Mi 1512Mi -1 true
	// 2 100
}
