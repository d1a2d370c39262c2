package wasm

import (
	"time"

	"github.com/go-logr/logr"
)

// Options configure a Module. Zero fields take the defaults.
type Options struct {
	// Name is the plugin's name: argv[0] of every instance, and the tag of its log lines.
	Name string

	// MaxInstances bounds the instances alive at once (the pool). Defaults to 1; set it to the
	// controller's MaxConcurrentReconciles.
	MaxInstances int

	// MemoryLimit caps one instance's linear memory, in bytes (rounded down to 64 KiB pages).
	// Defaults to 128 MiB. Growing past it fails inside the guest, which usually traps.
	MemoryLimit uint64

	// RecycleAbove replaces an instance after a reconcile that left its memory larger than
	// this (wasm memory never shrinks). Defaults to half of MemoryLimit.
	RecycleAbove uint64

	// IdleTimeout closes an instance that has served no reconcile for this long, and gives its
	// memory back to the OS: a plugin with nothing to do holds no instance, and the pool grows
	// again on its next reconcile, at the cost of an instantiation. Defaults to
	// DefaultIdleTimeout; negative keeps idle instances for ever.
	IdleTimeout time.Duration

	// CodeIdleTimeout lets go of the compiled module once no instance has been alive for this
	// long: a host holds compiled code (tens of MiB for a Go guest) for its busy plugins only.
	// The next reconcile loads it again, from the engine's on-disk compilation cache when it
	// has one (a fraction of a second for a Go guest, against seconds to compile). Defaults to
	// DefaultCodeIdleTimeout; negative keeps it for ever.
	CodeIdleTimeout time.Duration

	// Interruptible makes a reconcile's context deadline interrupt the guest wherever it is, a
	// loop included. The module is instrumented with a check at the top of every loop (see
	// binary.InstrumentLoops); a module using instructions beyond WebAssembly 2.0 is interrupted by
	// wazero's mechanism instead, which costs each call a goroutine and slows guest code more
	// (make bench measures both). Without it a looping guest holds its worker until it returns;
	// the loop checks stay, without their trap, so that such a guest still yields to the Go
	// runtime and delays nothing else. Defaults to true.
	Interruptible *bool

	// Snapshots starts instances from a copy of the first one, taken right after its
	// _initialize, instead of running _initialize in each: a copy of what the initialisation
	// wrote (about 1 MiB for a Go guest) against the start of the guest's runtime (tens of
	// milliseconds for Go). What the initialisation drew from random_get or the clocks is then
	// the same in every instance, and so is a generator seeded from it: a Go guest's math/rand
	// gives every instance the same sequence. A module whose state
	// does not all lie in its memory and mutable globals starts plainly, and the module logs
	// why. Defaults to true.
	Snapshots *bool

	// Logger receives the guest's stdout, stderr and log calls, and what the module says of its
	// instances. Give it the plugin's name as a value: lines here do not repeat it. Defaults to
	// logr.Discard().
	Logger logr.Logger

	// LogLimit bounds what the guest puts in Logger. Zero fields take the defaults.
	LogLimit LogLimit

	// CPU, if set, is the share of the host's cores the module's guests run within, with the
	// other modules given the same share. Nil: only MaxInstances bounds them.
	CPU *CPUShare

	// Code, if set, is charged for the memory of compiling the module and of its compiled code
	// while the Module lives (see CodeBudget). Nil: nothing bounds it but MaxModuleSize upstream.
	Code CodeBudget

	// Record captures every step of every instance (its _initialize, its manifest call, each
	// reconcile) as a recording.Step, with all the guest read from outside its memory and all it
	// gave out: a reconcile's Call gets its Step, and the steps its instance ran before it, from
	// which Replay makes the same state again. An instance whose steps hold more than
	// MaxLineage bytes is replaced after its reconcile, so that what a replay needs stays
	// bounded.
	Record bool
}

// MaxLineage bounds the bytes of recorded steps one instance holds (Options.Record).
const MaxLineage = 8 << 20

// LogLimit bounds a plugin's output in the host log: its stdout and stderr lines and its log
// calls. What is past it is dropped, counted (Stats.LogDroppedLines and LogDroppedBytes), and
// said in the log now and then.
type LogLimit struct {
	// LinesPerSecond is the rate of lines over all the plugin's instances, with a burst of
	// twice as many. Defaults to 1000: a line per reconcile of a busy controller.
	LinesPerSecond float64 `json:"linesPerSecond,omitempty"`
	// BytesPerSecond is the rate of bytes, with a burst of twice as many. Defaults to 1 MiB.
	BytesPerSecond float64 `json:"bytesPerSecond,omitempty"`
	// PerReconcile caps the bytes one reconcile may log. Defaults to 64 KiB.
	PerReconcile int `json:"perReconcile,omitempty"`
}

// Log limit defaults.
const (
	DefaultLogLinesPerSecond = 1000
	DefaultLogBytesPerSecond = 1 << 20
	DefaultLogPerReconcile   = 64 << 10
)

// DefaultIdleTimeout is how long an instance stays in the pool with nothing to do: long enough
// that a controller busy now and then keeps its instances between bursts, short enough that a
// host of many plugins holds memory for the busy ones only.
const DefaultIdleTimeout = 2 * time.Minute

// DefaultCodeIdleTimeout is how long a module with no instance keeps its compiled code.
const DefaultCodeIdleTimeout = 10 * time.Minute

const (
	pageSize            = 64 << 10
	DefaultMemoryLimit  = 128 << 20
	maxRequest          = 16 << 20 // a call's request or response
	maxLogLine          = 64 << 10
	exitCodeOutOfMemory = 2 // what the Go runtime exits with when it cannot grow memory
)

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "plugin"
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = 1
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.RecycleAbove == 0 {
		o.RecycleAbove = o.MemoryLimit / 2
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.CodeIdleTimeout == 0 {
		o.CodeIdleTimeout = DefaultCodeIdleTimeout
	}
	if o.Interruptible == nil {
		t := true
		o.Interruptible = &t
	}
	if o.Snapshots == nil {
		t := true
		o.Snapshots = &t
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.LogLimit.LinesPerSecond <= 0 {
		o.LogLimit.LinesPerSecond = DefaultLogLinesPerSecond
	}
	if o.LogLimit.BytesPerSecond <= 0 {
		o.LogLimit.BytesPerSecond = DefaultLogBytesPerSecond
	}
	if o.LogLimit.PerReconcile <= 0 {
		o.LogLimit.PerReconcile = DefaultLogPerReconcile
	}
	return o
}
