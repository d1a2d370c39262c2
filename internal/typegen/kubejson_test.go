package main

import "sigs.k8s.io/json"

// kubernetesUnmarshal decodes as client-go and the API server do: object keys match exactly,
// and an unknown or duplicate field is not an error.
func kubernetesUnmarshal(data []byte, v any) error {
	return json.UnmarshalCaseSensitivePreserveInts(data, v)
}
