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

func deploymentSample() []byte {
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

func BenchmarkDecodeDeployment(b *testing.B) {
	data := deploymentSample()
	if f := os.Getenv("DEPLOYMENT_JSON"); f != "" {
		data, _ = os.ReadFile(f)
	}
	b.ReportMetric(float64(len(data)), "bytes")
	b.Run("encoding-json-k8s", func(b *testing.B) {
		for b.Loop() {
			var d k8sappsv1.Deployment
			if err := json.Unmarshal(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		for b.Loop() {
			var d appsv1.Deployment
			if err := codec.Unmarshal(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
