package main

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The host's API clients have no client-side limit unless --kube-api-qps sets one: client-go's
// default (5 requests/s, burst 10, for every plugin at once) paced a controller of 2000 objects
// to minutes.
func TestClientConfigHasNoClientSideLimitByDefault(t *testing.T) {
	for _, tc := range []struct {
		name         string
		qps          float32
		burst        int
		wantLimit    bool
		wantQPS      float32
		wantBurst    int
		userQPS      float32 // what the kubeconfig's rest.Config came with
		userBurstArg int
	}{
		{name: "default", wantLimit: false},
		{name: "default, over a config that had client-go's", userQPS: 5, userBurstArg: 10, wantLimit: false},
		{name: "qps set", qps: 50, wantLimit: true, wantQPS: 50, wantBurst: 100},
		{name: "qps and burst set", qps: 50, burst: 70, wantLimit: true, wantQPS: 50, wantBurst: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &hostOptions{kubeAPIQPS: tc.qps, kubeAPIBurst: tc.burst}
			user := &rest.Config{Host: "https://127.0.0.1:6443", QPS: tc.userQPS, Burst: tc.userBurstArg}
			cfg, err := o.clientConfig(user)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			limiter := cs.CoreV1().RESTClient().GetRateLimiter()
			if got := limiter != nil; got != tc.wantLimit {
				t.Fatalf("client-side limiter %v, want one: %v", limiter, tc.wantLimit)
			}
			if tc.wantLimit && (limiter.QPS() != tc.wantQPS || cfg.Burst != tc.wantBurst) {
				t.Fatalf("limit %g/s burst %d, want %g/s burst %d", limiter.QPS(), cfg.Burst, tc.wantQPS, tc.wantBurst)
			}
			if user.QPS != tc.userQPS {
				t.Fatal("the caller's config was changed")
			}
		})
	}
}

func TestClientConfigRefusesABurstWithoutQPS(t *testing.T) {
	o := &hostOptions{kubeAPIBurst: 5}
	if _, err := o.clientConfig(&rest.Config{}); err == nil || !strings.Contains(err.Error(), "--kube-api-burst needs --kube-api-qps") {
		t.Fatalf("err = %v, want one saying the burst needs a QPS", err)
	}
}
