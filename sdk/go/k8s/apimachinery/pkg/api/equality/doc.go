// Package equality compares API objects as apimachinery's (k8s.io/apimachinery/pkg/api/equality)
// does: Semantic.DeepEqual, for the generated types, which typed CreateOrUpdate also decides by.
// It is reflect.DeepEqual but for a nil slice or map equal to an empty one, Quantities compared
// by Equal, and Times and MicroTimes by instant.
package equality
