// Package types holds the names of objects, as k8s.io/apimachinery/pkg/types does.
package types
