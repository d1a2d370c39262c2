package plugin

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin/internal/rollout"
)

// These tests run a rollout's steps offline (see swap_test.go); what the versions reconcile, and
// how they are judged on it, the e2e tests and package rollout's show.

func withRollout(cfg Config) Config {
	cfg.Rollout = &RolloutConfig{Shadow: &rollout.Shadow{Duration: &metav1.Duration{Duration: time.Hour}}, Canary: &rollout.Canary{Steps: []int{25}}}
	return cfg
}

func TestANewVersionShadowsUntilPromoted(t *testing.T) {
	h, _ := offlineHost(t)
	v1, v2 := swapGuest(t, "1"), swapGuest(t, "2")
	var news []string
	cfg := withRollout(thingsGrant())
	cfg.Hooks.OnRollout = func(e RolloutEvent) { news = append(news, e.Reason+" "+e.Status.Stage) }
	p := load(t, h, cfg, v1)
	ctx := context.Background()
	if err := p.Swap(ctx, v2); err != nil {
		t.Fatal(err)
	}
	st := p.Rollout()
	if p.Module().Digest() != digestOf(v1) || st == nil || st.Stage != StageShadow || st.Candidate != digestOf(v2) || !st.Active() {
		t.Fatalf("after the swap: serving %s, rollout %+v; want v1 serving and v2 in shadow", p.Module().ShortDigest(), st)
	}
	if !strings.Contains(st.Message, "the shadow step waits for 20 more reconciles") {
		t.Errorf("message %q: want what the step waits for", st.Message)
	}
	if got := (trigger{p}).Serving(); got != digestOf(v2) {
		t.Errorf("the triggers see %s; want the candidate, so that they do not swap to it again", got)
	}
	if err := p.Swap(ctx, v2); err != nil || p.Rollout().Candidate != digestOf(v2) || !p.Rollout().Active() {
		t.Errorf("a swap to the candidate again: %v, %+v; want nothing done", err, p.Rollout())
	}
	if !p.Promote() {
		t.Fatal("Promote found no rollout")
	}
	if p.Module().Digest() != digestOf(v2) || p.Rollout().Stage != StagePromoted || p.Rollout().Active() {
		t.Errorf("after Promote: serving %s, rollout %+v; want v2 serving, promoted", p.Module().ShortDigest(), p.Rollout())
	}
	if want := "RolloutStarted Shadow,RolloutPromoted Promoted"; strings.Join(news, ",") != want {
		t.Errorf("news %q, want %q", news, want)
	}
	if p.Promote() || p.Abort("x") {
		t.Error("Promote or Abort acted with no rollout running")
	}
}

func TestAnAbortedVersionIsNotTriedAgain(t *testing.T) {
	h, m := offlineHost(t)
	v1, v2 := swapGuest(t, "1"), swapGuest(t, "2")
	p := load(t, h, withRollout(thingsGrant()), v1)
	ctx := context.Background()
	if err := p.Swap(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if !p.Abort("aborted by an operator") {
		t.Fatal("Abort found no rollout")
	}
	if st := p.Rollout(); st.Stage != StageAborted || st.Message != "aborted by an operator" || st.Active() {
		t.Errorf("rollout %+v; want aborted, saying why", st)
	}
	n := compiles(m, "swap")
	var before *RefusedBeforeError
	if err := p.Swap(ctx, v2); !errors.As(err, &before) || !strings.Contains(err.Error(), "aborted by an operator") {
		t.Errorf("a swap to the aborted version: %v; want it refused, saying why", err)
	}
	if compiles(m, "swap") != n || p.Module().Digest() != digestOf(v1) || p.Rollout().Active() {
		t.Error("the aborted version was compiled or serves again")
	}
}

func TestANewerVersionOrTheLiveOneEndsARollout(t *testing.T) {
	h, _ := offlineHost(t)
	v1, v2, v3, v4 := swapGuest(t, "1"), swapGuest(t, "2"), swapGuest(t, "3"), swapGuest(t, "4")
	cm := abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	p := load(t, h, withRollout(thingsGrant(cm)), v1)
	ctx := context.Background()
	if err := p.Swap(ctx, v2); err != nil {
		t.Fatal(err)
	}
	// v4 watches Secrets, which the grant does not let it: refused, and v2's rollout goes on.
	if err := p.Swap(ctx, v4); err == nil {
		t.Fatal("v4 was taken")
	}
	if st := p.Rollout(); st.Stage != StageShadow || st.Candidate != digestOf(v2) {
		t.Errorf("rollout of v2 after v4 was refused: %+v; want it going on", st)
	}
	if err := p.Swap(ctx, v3); err != nil {
		t.Fatal(err)
	}
	if st := p.Rollout(); st.Stage != StageShadow || st.Candidate != digestOf(v3) {
		t.Errorf("rollout after v3 came in: %+v; want v3's", st)
	}
	if kinds := p.Kinds(); len(kinds) != 2 {
		t.Errorf("kinds while v3 rolls out: %v; want v1's and v3's (ConfigMaps)", kinds)
	}
	if err := p.Swap(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if st := p.Rollout(); st.Stage != StageAborted || p.Module().Digest() != digestOf(v1) {
		t.Errorf("back to v1: rollout %+v, serving %s; want the rollout aborted, v1 serving", st, p.Module().ShortDigest())
	}
	if kinds := p.Kinds(); len(kinds) != 1 {
		t.Errorf("kinds after v3's rollout was aborted: %v; want v1's alone", kinds)
	}
	if err := p.Swap(ctx, v2); err != nil || p.Rollout().Stage != StageShadow {
		t.Fatalf("v2 once more: %v, %+v", err, p.Rollout())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Rollout(); st.Stage != StageAborted || st.Message != "the plugin stopped" {
		t.Errorf("after Close: %+v; want the rollout aborted", st)
	}
}

// keyNames are keys as strings, sorted.
func keyNames(keys []cache.Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// A change of the shards a plugin runs moves every source to them, a rollout's candidate's own
// too.
func TestNewShardsMoveTheCandidatesWatchesToo(t *testing.T) {
	h, _ := offlineHost(t)
	cm := abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	cfg := withRollout(thingsGrant(cm))
	cfg.Shards = 2
	p := load(t, h, cfg, swapGuest(t, "1"))                                 // Things
	if err := p.Swap(context.Background(), swapGuest(t, "3")); err != nil { // Things and ConfigMaps, in a rollout
		t.Fatal(err)
	}
	if st := p.Rollout(); st == nil || !st.Active() {
		t.Fatalf("rollout %+v; want one running", st)
	}
	p.share.runNext([]int{1})
	if err := p.placeSources(); err != nil {
		t.Fatal(err)
	}
	want := []string{"ConfigMap.v1, shard 1/2 by namespace", "Thing.v1.follow.wasmrec.dev, shard 1/2 by namespace"}
	if got := keyNames(p.currentKeys()); !slices.Equal(got, want) {
		t.Errorf("keys after a move to shard 1: %q; want %q", got, want)
	}
	var srcs []string
	for _, s := range p.allSources() {
		srcs = append(srcs, s.Key.String())
	}
	slices.Sort(srcs)
	if !slices.Equal(slices.Compact(srcs), want) {
		t.Errorf("the controller's sources watch %q; want %q", srcs, want)
	}
	if !slices.Equal(p.sharding().Held, []int{1}) {
		t.Errorf("running %v; want shard 1", p.sharding())
	}
}

// A plugin with a rollout keeps its module in the OCI cache for a restart in the middle of a
// rollout, once it loads; a module that fails to load is not kept.
func TestAModuleThatFailsToLoadIsNotKept(t *testing.T) {
	h, _ := offlineHost(t)
	dir := t.TempDir()
	c, err := oci.New(oci.Options{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	h.oci = c
	files := func() []string {
		var out []string
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, path)
			}
			return nil
		})
		return out
	}
	cfg := withRollout(Config{Name: "swap", Module: "swap.wasm"}) // no grant: its watches are refused
	if _, err := h.Load(context.Background(), cfg, swapGuest(t, "1")); err == nil {
		t.Fatal("a module watching what it may not loaded")
	}
	if _, err := h.Load(context.Background(), cfg, []byte("not wasm")); err == nil {
		t.Fatal("garbage loaded")
	}
	if got := files(); len(got) != 0 {
		t.Errorf("modules that failed to load were kept: %q", got)
	}
	load(t, h, withRollout(thingsGrant()), swapGuest(t, "1"))
	if got := files(); len(got) != 1 {
		t.Errorf("kept %q once the module loaded; want it alone", got)
	}
}

// A newer version ends a running rollout only once it is sure to come in: one whose new watches
// do not sync is refused, and the rollout it would have ended runs on.
func TestARolloutRunsOnWhenTheNextVersionCannotComeIn(t *testing.T) {
	h, _ := offlineHost(t)
	cm := abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	p := load(t, h, withRollout(thingsGrant(cm)), swapGuest(t, "1"))
	if err := p.Swap(context.Background(), swapGuest(t, "2")); err != nil { // the same watches
		t.Fatal(err)
	}
	p.running.Store(true)        // as Host.Run says once the controller starts: v3's watches must sync
	defer p.running.Store(false) // for the rollout's end at Close, which would list what never syncs
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.Swap(ctx, swapGuest(t, "3")); err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Fatalf("a swap to watches that cannot sync returned %v; want an error that says they did not sync", err)
	}
	if st := p.Rollout(); st == nil || !st.Active() || st.Candidate != digestOf(swapGuest(t, "2")) {
		t.Errorf("rollout after the refused swap: %+v; want v2's, running on", st)
	}
}
