package rollout

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/host/shard"
)

// Defaults.
const (
	DefaultShadowDuration = time.Minute
	DefaultStepDuration   = time.Minute
	DefaultMinReconciles  = 20
	DefaultErrors         = 0.01
	DefaultPanics         = 0.0
	DefaultTimeouts       = 0.01
	DefaultRefusedWrites  = 0.01
)

// Config is how a plugin's new module versions come in. Without one (nil), a new version takes
// every key at once.
type Config struct {
	// Replay, if set, first runs the new version on the live version's latest recordings (the
	// plugin's settings must record), offline: each recording's writes, Events and result
	// against the live version's, judged by analysis.tolerance.differingWrites.
	Replay *Replay `json:"replay,omitempty"`
	// Shadow, if set, first runs the new version beside the live one: it reconciles the keys the
	// live version reconciles, from the same cache, and its writes are sent with dryRun=All, so
	// the API server validates them and stores nothing.
	Shadow *Shadow `json:"shadow,omitempty"`
	// Canary, if set, then gives the new version a growing share of the keys, the live version
	// the rest.
	Canary *Canary `json:"canary,omitempty"`
	// Analysis bounds how much worse than the live version the new one may do at each step.
	Analysis Analysis `json:"analysis,omitempty"`
}

// Replay is the replay step.
type Replay struct {
	// Recordings is how many of the live version's latest recordings it runs. Defaults to 20.
	Recordings int `json:"recordings,omitempty"`
}

// DefaultReplayRecordings is Replay.Recordings when unset.
const DefaultReplayRecordings = 20

// Count is how many recordings the step runs.
func (r *Replay) Count() int {
	if r.Recordings > 0 {
		return r.Recordings
	}
	return DefaultReplayRecordings
}

// Shadow is the shadow step.
type Shadow struct {
	// Duration is how long it lasts at least. Defaults to 1m.
	Duration *metav1.Duration `json:"duration,omitempty"`
	// Reconciles is how many reconciles it compares at least. Defaults to
	// analysis.minReconciles.
	Reconciles int `json:"reconciles,omitempty"`
}

// Canary is the canary steps.
type Canary struct {
	// Steps are the shares of keys (in percent, 1 to 99, increasing) the new version takes, one
	// step after the other. Keys are assigned by the shard hash of "namespace/name".
	Steps []int `json:"steps"`
	// StepDuration is how long each step lasts at least. Defaults to 1m.
	StepDuration *metav1.Duration `json:"stepDuration,omitempty"`
}

// Analysis is what each step needs to pass.
type Analysis struct {
	// MinReconciles is how many reconciles the new version makes in a step before the step is
	// judged; a step does not end before. Defaults to 20.
	MinReconciles int `json:"minReconciles,omitempty"`
	// Tolerance is how far each of the new version's rates may exceed the live version's.
	Tolerance Tolerance `json:"tolerance,omitempty"`
}

// Tolerance bounds the new version's rates over the live version's: rates per reconcile
// (refused writes: per write), each a fraction from 0 to 1 added to the live version's rate.
type Tolerance struct {
	// Errors: reconciles that return an error. Defaults to 0.01.
	Errors *float64 `json:"errors,omitempty"`
	// Panics: reconciles whose guest trapped (a panic, say). Defaults to 0.
	Panics *float64 `json:"panics,omitempty"`
	// Timeouts: reconciles stopped at their timeout. Defaults to 0.01.
	Timeouts *float64 `json:"timeouts,omitempty"`
	// RefusedWrites: writes the host or the API server refused (forbidden, invalid, malformed).
	// Defaults to 0.01.
	RefusedWrites *float64 `json:"refusedWrites,omitempty"`
	// DifferingWrites: in the shadow step, reconciles whose writes differ from the live
	// version's; in the replay step, recordings whose writes, Events or result differ. Defaults
	// to none: differences are counted and shown, not judged.
	DifferingWrites *float64 `json:"differingWrites,omitempty"`
}

// Validate checks c; errors name the field under "rollout".
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("rollout."+format, args...)) }
	if c.Shadow == nil && c.Canary == nil {
		bad("shadow or rollout.canary is required: a rollout without steps is a plain swap; leave rollout out for that")
	}
	if r := c.Replay; r != nil && r.Recordings < 0 {
		bad("replay.recordings %d: must not be negative", r.Recordings)
	}
	if s := c.Shadow; s != nil {
		if s.Duration != nil && s.Duration.Duration <= 0 {
			bad("shadow.duration %s: give a positive duration, like 2m", s.Duration.Duration)
		}
		if s.Reconciles < 0 {
			bad("shadow.reconciles %d: must not be negative", s.Reconciles)
		}
	}
	if k := c.Canary; k != nil {
		if len(k.Steps) == 0 {
			bad("canary.steps is empty: give the shares of keys in percent, like [10, 50]")
		}
		for i, w := range k.Steps {
			if w < 1 || w > 99 || (i > 0 && w <= k.Steps[i-1]) {
				bad("canary.steps[%d] %d: shares are percents from 1 to 99, each above the one before", i, w)
			}
		}
		if k.StepDuration != nil && k.StepDuration.Duration <= 0 {
			bad("canary.stepDuration %s: give a positive duration, like 1m", k.StepDuration.Duration)
		}
	}
	if c.Analysis.MinReconciles < 0 {
		bad("analysis.minReconciles %d: must not be negative", c.Analysis.MinReconciles)
	}
	t := c.Analysis.Tolerance
	for name, v := range map[string]*float64{"errors": t.Errors, "panics": t.Panics, "timeouts": t.Timeouts, "refusedWrites": t.RefusedWrites, "differingWrites": t.DifferingWrites} {
		if v != nil && (*v < 0 || *v > 1) {
			bad("analysis.tolerance.%s %v: give a fraction from 0 to 1 (0.01 is one point in a hundred)", name, *v)
		}
	}
	return errors.Join(errs...)
}

// Step is one step of a rollout.
type Step struct {
	// Replay marks the replay step: the live version reconciles every key, and the new one
	// runs on its recordings.
	Replay bool
	// Share is the percent of keys the new version reconciles for real; 0 in the replay and
	// shadow steps, where the live version reconciles every key (and the new one shadows it).
	Share int
	// Duration is the step's least length; MinReconciles the new version's least reconciles.
	Duration      time.Duration
	MinReconciles int
}

// Shadow reports whether s is the shadow step.
func (s Step) Shadow() bool { return s.Share == 0 && !s.Replay }

// Name is "replay", "shadow" or "canary 25%".
func (s Step) Name() string {
	switch {
	case s.Replay:
		return "replay"
	case s.Shadow():
		return "shadow"
	}
	return fmt.Sprintf("canary %d%%", s.Share)
}

// Steps are c's steps, in order, defaults filled in. After the last the new version takes all.
func (c *Config) Steps() []Step {
	min := c.minReconciles()
	var out []Step
	if c.Replay != nil {
		out = append(out, Step{Replay: true})
	}
	if s := c.Shadow; s != nil {
		st := Step{Duration: DefaultShadowDuration, MinReconciles: min}
		if s.Duration != nil {
			st.Duration = s.Duration.Duration
		}
		if s.Reconciles > 0 {
			st.MinReconciles = s.Reconciles
		}
		out = append(out, st)
	}
	if k := c.Canary; k != nil {
		d := DefaultStepDuration
		if k.StepDuration != nil {
			d = k.StepDuration.Duration
		}
		for _, w := range k.Steps {
			out = append(out, Step{Share: w, Duration: d, MinReconciles: min})
		}
	}
	return out
}

func (c *Config) minReconciles() int {
	if c.Analysis.MinReconciles > 0 {
		return c.Analysis.MinReconciles
	}
	return DefaultMinReconciles
}

// Candidate reports whether the new version reconciles the key namespace/name at share percent:
// whether the key's shard hash, mixed, falls in the first share of 100 equal ranges. A key in
// the share at one step stays in it at every larger one.
//
// The shard hash (FNV-1a) is mixed with murmur3's finalizer first: its top bits barely move
// between names that differ in their last characters, and controllers' objects are named so
// ("cm-0001", "cm-0002"); unmixed, a 25% share took all or none of 300 such keys.
func Candidate(namespace, name string, share int) bool {
	h := shard.Hash(namespace + "/" + name)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	hi, _ := bits.Mul64(h, 100)
	return int(hi) < share
}
