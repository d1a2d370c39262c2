package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
)

func ptr[T any](v T) *T { return &v }

func TestStepsFillInDefaults(t *testing.T) {
	c := Config{Shadow: &Shadow{}, Canary: &Canary{Steps: []int{10, 50}, StepDuration: &metav1.Duration{Duration: 2 * time.Second}}}
	got := fmt.Sprint(c.Steps())
	want := fmt.Sprint([]Step{{false, 0, time.Minute, 20}, {false, 10, 2 * time.Second, 20}, {false, 50, 2 * time.Second, 20}})
	if got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	c = Config{Shadow: &Shadow{Duration: &metav1.Duration{Duration: time.Second}, Reconciles: 100}, Analysis: Analysis{MinReconciles: 5}}
	if s := c.Steps(); len(s) != 1 || s[0].MinReconciles != 100 || s[0].Duration != time.Second || !s[0].Shadow() {
		t.Errorf("shadow only: %v", s)
	}
	c = Config{Replay: &Replay{}, Shadow: &Shadow{}}
	if s := c.Steps(); len(s) != 2 || !s[0].Replay || s[0].Shadow() || s[0].Name() != "replay" || !s[1].Shadow() || c.Replay.Count() != DefaultReplayRecordings {
		t.Errorf("replay, then shadow: %v", s)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "rollout.shadow or rollout.canary is required"},
		{Config{Canary: &Canary{Steps: []int{50, 10}}}, "rollout.canary.steps[1] 10"},
		{Config{Canary: &Canary{Steps: []int{100}}}, "rollout.canary.steps[0] 100"},
		{Config{Canary: &Canary{}}, "rollout.canary.steps is empty"},
		{Config{Shadow: &Shadow{Duration: &metav1.Duration{}}}, "rollout.shadow.duration 0s"},
		{Config{Shadow: &Shadow{}, Analysis: Analysis{Tolerance: Tolerance{Errors: ptr(5.0)}}}, "rollout.analysis.tolerance.errors 5"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.c, err, tc.want)
		}
	}
	if err := (&Config{Shadow: &Shadow{}, Canary: &Canary{Steps: []int{1, 99}}}).Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
}

func TestCandidateSharesGrowAndSplitKeys(t *testing.T) {
	in := map[int]int{}
	for i := range 10000 { // names as controllers make them: in sequence, in a few namespaces
		ns, name := fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("cm-%04d", i)
		prev := false
		for _, share := range []int{1, 10, 25, 50, 99} {
			c := Candidate(ns, name, share)
			if prev && !c {
				t.Fatalf("%s/%s is the new version's at a smaller share but not at %d%%", ns, name, share)
			}
			if c {
				in[share]++
			}
			prev = c
		}
	}
	for share, n := range in { // within 2 points of the share
		if got := float64(n) / 100; got < float64(share)-2 || got > float64(share)+2 {
			t.Errorf("share %d%%: %d of 10000 keys", share, n)
		}
	}
}

// 300 ConfigMaps of one namespace named in sequence: a 25% share takes about a quarter (the
// shard hash alone took all of them or none).
func TestCandidateSplitsSequentialNames(t *testing.T) {
	n := 0
	for i := range 300 {
		if Candidate("team-a", fmt.Sprintf("cm-%04d", i), 25) {
			n++
		}
	}
	if n < 55 || n > 95 {
		t.Errorf("a 25%% share took %d of 300 keys", n)
	}
}

func TestJudge(t *testing.T) {
	step := Step{Share: 0, MinReconciles: 20}
	a := Analysis{}
	for _, tc := range []struct {
		name       string
		live, cand Figures
		diffs      Differences
		a          Analysis
		want       Verdict
		why        string
	}{
		{name: "too few", cand: Figures{Reconciles: 19, Errors: 19}, want: Pending},
		{name: "fails a tenth", live: Figures{Reconciles: 200}, cand: Figures{Reconciles: 200, Errors: 20}, want: Beyond,
			why: "its error rate over the shadow step is 10.0% (20 of 200), the live version's 0.0% (0 of 200), and the tolerance 1.0%"},
		{name: "fails as the live one does", live: Figures{Reconciles: 100, Errors: 10}, cand: Figures{Reconciles: 100, Errors: 11}, want: Within},
		{name: "one panic", live: Figures{Reconciles: 100}, cand: Figures{Reconciles: 100, Panics: 1}, want: Beyond, why: "panic rate"},
		{name: "timeouts", cand: Figures{Reconciles: 50, Timeouts: 2}, want: Beyond, why: "timeout rate"},
		{name: "refused writes, per write", live: Figures{Reconciles: 50, Writes: 50}, cand: Figures{Reconciles: 50, Writes: 200, RefusedWrites: 2}, want: Within},
		{name: "refused writes", live: Figures{Reconciles: 50, Writes: 50}, cand: Figures{Reconciles: 50, Writes: 50, RefusedWrites: 2}, want: Beyond, why: "refused-write rate"},
		{name: "differences not judged by default", cand: Figures{Reconciles: 50}, diffs: Differences{Compared: 50, Writes: 50}, want: Within},
		{name: "differences judged", cand: Figures{Reconciles: 50}, diffs: Differences{Compared: 50, Writes: 5}, a: Analysis{Tolerance: Tolerance{DifferingWrites: ptr(0.05)}}, want: Beyond, why: "differing-write rate over the shadow step is 10.0%"},
		{name: "a looser tolerance", live: Figures{Reconciles: 100}, cand: Figures{Reconciles: 100, Errors: 10}, a: Analysis{Tolerance: Tolerance{Errors: ptr(0.1)}}, want: Within},
	} {
		if tc.a.Tolerance == (Tolerance{}) {
			tc.a = a
		}
		v, why := tc.a.Judge(step, tc.live, tc.cand, tc.diffs)
		if v != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: verdict %d %q, want %d with %q", tc.name, v, why, tc.want, tc.why)
		}
	}
}

func TestCounterCountsEachOutcomeOnce(t *testing.T) {
	var c Counter
	c.Add(Outcome{})
	c.Add(Outcome{Failed: true, Writes: 2, Refused: 1})
	c.Add(Outcome{Panicked: true, Failed: true})
	c.Add(Outcome{TimedOut: true, Failed: true})
	want := Figures{Reconciles: 4, Errors: 1, Panics: 1, Timeouts: 1, Writes: 2, RefusedWrites: 1}
	if got := c.Figures(); got != want {
		t.Errorf("figures %+v, want %+v", got, want)
	}
}

func TestCompare(t *testing.T) {
	patch := func(v string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"a","type":"merge","patch":{"metadata":{"annotations":{"seen":"` + v + `"}}}}`)
	}
	rec := func(bodies ...[]byte) *Record {
		r := &Record{}
		for _, b := range bodies {
			r.Add(abi.ImportPatch, b, abi.StatusOK)
		}
		return r
	}
	reordered := []byte(`{"name":"a","namespace":"ns","kind":"ConfigMap","apiVersion":"v1","patch":{"metadata":{"annotations":{"seen":"3"}}},"type":"merge"}`)
	for _, tc := range []struct {
		name         string
		live, cand   *Record
		lr, cr       Result
		writes, res  bool
		diffContains string
	}{
		{name: "same", live: rec(patch("3")), cand: rec(patch("3"))},
		{name: "same values, other order", live: rec(patch("3")), cand: rec(reordered)},
		{name: "another value", live: rec(patch("3")), cand: rec(patch("3x")), writes: true,
			diffContains: `write 1, patch v1 ConfigMap ns/a: patch.metadata.annotations.seen: live "3", new "3x"`},
		{name: "one write missing", live: rec(patch("3")), cand: rec(), writes: true, diffContains: "the live version made patch v1 ConfigMap ns/a, the new version did not"},
		{name: "one write more", live: rec(), cand: rec(patch("3")), writes: true, diffContains: "the new version made patch"},
		{name: "result", live: rec(), cand: rec(), cr: Result{Failed: true}, res: true},
	} {
		w, r, d := Compare(tc.live, tc.cand, tc.lr, tc.cr)
		if w != tc.writes || r != tc.res || !strings.Contains(d, tc.diffContains) {
			t.Errorf("%s: writes differ %v, result differs %v, diff %q; want %v, %v, %q", tc.name, w, r, d, tc.writes, tc.res, tc.diffContains)
		}
	}
}
