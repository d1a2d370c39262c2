package main

import (
	"encoding/json"
	"os"
	"testing"

	k8sappsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/randfill"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
	appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
)

// randomDeployment is a Deployment with every field filled at random, its strings short ASCII.
func randomDeployment() []byte {
	var d k8sappsv1.Deployment
	filler(3).NilChance(0.5).NumElements(1, 2).Funcs(func(s *string, c randfill.Continue) {
		const letters = "abcdefghijklmnopqrstuvwxyz-0123456789"
		b := make([]byte, 3+c.Intn(12))
		for i := range b {
			b[i] = letters[c.Intn(len(letters))]
		}
		*s = string(b)
	}).Fill(&d)
	b, _ := json.Marshal(&d)
	return b
}

// BenchmarkDecodeDeployment decodes a Deployment natively with encoding/json into k8s.io/api's
// type and with the generated code: "typical" is the 1.3 KB Deployment of host/wasm's
// BenchmarkReconcile (what the guest figures there decode), "random" one with every field set.
func BenchmarkDecodeDeployment(b *testing.B) {
	typical, err := os.ReadFile("testdata/deployment.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, sample := range []struct {
		name string
		data []byte
	}{{"typical", typical}, {"random", randomDeployment()}} {
		b.Run(sample.name+"/encoding-json-k8s", func(b *testing.B) {
			b.ReportMetric(float64(len(sample.data)), "bytes")
			for b.Loop() {
				var d k8sappsv1.Deployment
				if err := json.Unmarshal(sample.data, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sample.name+"/generated", func(b *testing.B) {
			for b.Loop() {
				var d appsv1.Deployment
				if err := codec.Unmarshal(sample.data, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
