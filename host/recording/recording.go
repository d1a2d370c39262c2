package recording

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wasmrec/wasmrec/abi"
)

// Format names this version of the format. A reader refuses a recording of another, but reads
// formatV1's: the same documents, a log's entry holding one each (v2's may hold several).
const (
	Format   = "wasmrec.dev/recording/v2"
	formatV1 = "wasmrec.dev/recording/v1"
)

// The kinds of Step.
const (
	StepInitialize = "initialize" // the module's _initialize, run as an instance starts
	StepManifest   = "manifest"   // its manifest export
	StepReconcile  = "reconcile"  // its reconcile export
	StepMap        = "map"        // its map export, for an event of a watched kind
)

// The outcomes of a Step.
const (
	Returned   = "returned"   // the export returned
	Trapped    = "trapped"    // it trapped (a panic, an out-of-bounds access, proc_exit...)
	TimedOut   = "timedOut"   // the host stopped it at its deadline
	BadResult  = "badResult"  // it returned a result the host could not read
	Unfinished = "unfinished" // the host stopped recording it (its inputs past MaxStep)
)

// The types of Event.
const (
	EventCall     = "call"     // a host call: Fn, In (request), Status, Out (answer)
	EventMonotime = "monotime" // the guest read its monotonic clock: N nanoseconds
	EventWalltime = "walltime" // it read the wall clock: N nanoseconds since 1970
	EventRandom   = "random"   // it drew random bytes: Out
	EventSleep    = "sleep"    // it slept, or asked to: N nanoseconds
	EventWrite    = "write"    // it wrote In to Fn, "stdout" or "stderr"
	EventLog      = "log"      // it called log: N is the level, In the message
)

// Event is one thing a guest did that crossed into the host, in the order it did them: what it
// read from outside its memory (a host call's answer, a clock, random bytes) and what it gave
// out (a call's request, a log line, output).
type Event struct {
	Type   string `json:"type"`
	Fn     string `json:"fn,omitempty"`
	In     []byte `json:"in,omitempty"`
	Out    []byte `json:"out,omitempty"`
	Status uint32 `json:"status,omitempty"`
	N      int64  `json:"n,omitempty"`
}

// Request is the reconcile request a guest was given.
type Request struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Retries   uint32 `json:"retries,omitempty"`
}

// String is the request as people read it: "namespace/name (retry 2)".
func (r Request) String() string {
	s := r.Name
	if r.Namespace != "" {
		s = r.Namespace + "/" + s
	}
	if r.Retries > 0 {
		s += fmt.Sprintf(" (retry %d)", r.Retries)
	}
	return s
}

// MapInput is what a map step was given: which of the manifest's watches the object is of, and
// the object's JSON.
type MapInput struct {
	Watch  uint32 `json:"watch"`
	Object []byte `json:"object"`
}

// Step is one call into an instance: what the guest saw and did, whole, from its start to its
// outcome. Replayed on an instance in the same state, a module makes the same events and ends
// the same way. A Step does not change once its call has ended.
type Step struct {
	Kind    string    `json:"kind"`
	Request *Request  `json:"request,omitempty"` // a reconcile's
	Map     *MapInput `json:"map,omitempty"`     // a map's
	Events  []Event   `json:"events"`
	// Result is what the export returned: a reconcile's result envelope (none: success), the
	// manifest's bytes, a map's request envelopes.
	Result  []byte `json:"result,omitempty"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"` // the host's words for a trap, a timeout, a bad result

	size int // the bytes its events hold
}

// Add appends e to the step.
func (s *Step) Add(e Event) {
	s.Events = append(s.Events, e)
	s.size += 32 + len(e.In) + len(e.Out)
}

// Describe says in words how the step ended: its outcome, and a reconcile's result.
func (s *Step) Describe() string {
	switch s.Outcome {
	case Returned:
	case TimedOut:
		return "timed out"
	case BadResult:
		return "returned a malformed result"
	default:
		return s.Outcome
	}
	switch s.Kind {
	case StepReconcile:
	case StepMap:
		reqs, err := abi.DecodeRequests(s.Result)
		if err != nil {
			return fmt.Sprintf("returned %q", s.Result)
		}
		return fmt.Sprintf("mapped to %d requests", len(reqs))
	default:
		return fmt.Sprintf("returned %d bytes", len(s.Result))
	}
	if len(s.Result) == 0 {
		return "success"
	}
	r, err := abi.DecodeResult(s.Result)
	if err != nil {
		return fmt.Sprintf("returned %q", s.Result)
	}
	return DescribeResult(r)
}

// DescribeResult says a reconcile's result in words.
func DescribeResult(r abi.Result) string {
	switch {
	case r.Failed && r.Terminal:
		return fmt.Sprintf("a terminal error %q", r.Err)
	case r.Failed:
		return fmt.Sprintf("an error %q", r.Err)
	case r.RequeueAfter > 0:
		return "requeue after " + r.RequeueAfter.String()
	case r.Requeue:
		return "requeue"
	}
	return "success"
}

// Size is about how many bytes the step holds.
func (s *Step) Size() int {
	n := s.size + 64 + len(s.Result) + len(s.Error)
	if s.Map != nil {
		n += len(s.Map.Object)
	}
	return n
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Settings are what the host set for the module that the guest could tell: they must be the
// same for a replay to see what the recorded reconcile saw.
type Settings struct {
	// Name is the plugin's name, the guest's argv[0].
	Name string `json:"name"`
	// MemoryLimit is the instance's memory cap, in bytes: a guest's memory.grow past it fails.
	MemoryLimit uint64 `json:"memoryLimit"`
	// Interruptible says the module was instrumented to stop at its deadline.
	Interruptible bool `json:"interruptible"`
}

// Recording is one reconcile, with what a replay needs to put a new instance in the state the
// recorded one was in: the steps the instance ran before it, in order, from its _initialize.
// Its steps are stored in its instance's log, the reconcile's last (see Store); the recording
// names them by their number and their chain, and its digest, that of its JSON, covers them
// all.
type Recording struct {
	Format      string    `json:"format"`
	Plugin      string    `json:"plugin"`
	Module      string    `json:"module"` // the module's digest
	Settings    Settings  `json:"settings"`
	ReconcileID string    `json:"reconcileID,omitempty"`
	Time        time.Time `json:"time"` // when the reconcile started
	Duration    string    `json:"duration,omitempty"`
	// Request and Outcome repeat the reconcile step's, for a list.
	Request Request `json:"request"`
	Outcome string  `json:"outcome"`
	Failed  bool    `json:"failed,omitempty"` // it trapped, timed out, or returned an error
	// Instance names the instance the reconcile ran on, Before how many steps it ran before it
	// (its _initialize first: the reconcile is step Before of the instance's log), and Chain
	// the digest of steps 0 to Before: ChainOf their JSON, in order.
	Instance string `json:"instance"`
	Before   int    `json:"before"`
	Chain    string `json:"chain"`

	// Step is the reconcile, read from the instance's log.
	Step *Step `json:"-"`
}

// Chain is the running digest of an instance's steps: Next folds in one more.
type Chain [sha256.Size]byte

// Next is the chain after a step whose JSON is b: sha256(c || sha256(b)).
func (c Chain) Next(b []byte) Chain {
	sum := sha256.Sum256(b)
	return sha256.Sum256(append(c[:], sum[:]...))
}

func (c Chain) String() string { return "sha256:" + hex.EncodeToString(c[:]) }

// encoder and decoder are shared: zstd's are safe for concurrent EncodeAll and DecodeAll.
var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
)

// compress appends the zstd frame of b to dst.
func compress(dst, b []byte) []byte { return encoder.EncodeAll(b, dst) }

func decompress(b []byte) ([]byte, error) { return decoder.DecodeAll(b, nil) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// Encode returns r's JSON, and its digest: the recording's name.
func (r *Recording) Encode() ([]byte, string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, "", err
	}
	return b, digestOf(b), nil
}

// DecodeRecording reads a recording's JSON, and checks its format.
func DecodeRecording(b []byte) (*Recording, error) {
	var r Recording
	if err := strictDecode(b, &r); err != nil {
		return nil, fmt.Errorf("not a recording: %w", err)
	}
	if r.Format != Format && r.Format != formatV1 {
		return nil, fmt.Errorf("a recording of format %q; this wasmrec reads %q and %q", r.Format, Format, formatV1)
	}
	if r.Instance == "" || r.Before < 0 {
		return nil, fmt.Errorf("a recording that names no instance, or a negative step")
	}
	return &r, nil
}

// DecodeStep reads a step's JSON.
func DecodeStep(b []byte) (*Step, error) {
	var s Step
	if err := strictDecode(b, &s); err != nil {
		return nil, fmt.Errorf("not a recorded step: %w", err)
	}
	switch s.Kind {
	case StepInitialize, StepManifest, StepReconcile:
	case StepMap:
		if s.Map == nil {
			return nil, fmt.Errorf("a map step without its input")
		}
	default:
		return nil, fmt.Errorf("a step of kind %q, not %s, %s, %s or %s", s.Kind, StepInitialize, StepManifest, StepReconcile, StepMap)
	}
	return &s, nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}
