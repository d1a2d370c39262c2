package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

// rerunner answers a guest from a recording made by another build of it, as well as the
// recording can, and never stops it: the clocks and random bytes go on from the recorded
// ones, each in its turn; a read gets the recorded answer to the same request, or not found;
// a write gets the recorded answer to a write of the same object, or is taken as done.
type rerunner struct {
	mono, wall, random int // the next of each the step recorded
	seed               [32]byte
}

// answer is the event the guest, doing got in a rerun of want, is given.
func (rr *rerunner) answer(want *recording.Step, got recording.Event) *recording.Event {
	nth := func(typ string, n int) *recording.Event {
		for i := range want.Events {
			if want.Events[i].Type == typ {
				if n == 0 {
					return &want.Events[i]
				}
				n--
			}
		}
		return nil
	}
	last := func(typ string) int64 {
		var v int64
		for _, e := range want.Events {
			if e.Type == typ {
				v = e.N
			}
		}
		return v
	}
	switch got.Type {
	case recording.EventMonotime, recording.EventWalltime:
		idx := &rr.mono
		if got.Type == recording.EventWalltime {
			idx = &rr.wall
		}
		e := nth(got.Type, *idx)
		*idx++
		if e == nil { // past the recorded readings: a microsecond on from the last
			got.N = last(got.Type) + int64(*idx)*1000
			return &got
		}
		return e
	case recording.EventRandom:
		e := nth(got.Type, rr.random)
		rr.random++
		if e != nil && e.N == got.N {
			return e
		}
		out := make([]byte, 0, got.N) // deterministic, from the recording
		for i := uint64(0); len(out) < int(got.N); i++ {
			var b [40]byte
			copy(b[:], rr.seed[:])
			binary.LittleEndian.PutUint64(b[32:], uint64(rr.random)<<32|i)
			sum := sha256.Sum256(b[:])
			out = append(out, sum[:min(len(sum), int(got.N)-len(out))]...)
		}
		got.Out = out
		return &got
	case recording.EventCall:
		if e := sameCall(want, got); e != nil {
			return e
		}
		got.Status, got.Out = uint32(abi.StatusOK), nil
		switch got.Fn {
		case abi.ImportGet:
			got.Status, got.Out = uint32(abi.StatusNotFound), []byte("the recording holds no answer to this get")
		case abi.ImportList:
			got.Out = []byte(`{"items":[]}`)
		case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
			got.Out = got.In // taken as written
			if obj, _, err := abi.SplitWrite(got.In); err == nil {
				got.Out = obj
			}
		case abi.ImportPatch:
			var p abi.PatchRequest
			if json.Unmarshal(got.In, &p) == nil {
				got.Out, _ = json.Marshal(map[string]any{"apiVersion": p.APIVersion, "kind": p.Kind, "metadata": map[string]any{"name": p.Name, "namespace": p.Namespace}})
			}
		}
		return &got
	}
	return &got // sleeps are not slept; output is taken
}

// sameCall finds the recorded answer to got: a read with the same request, or a write of the
// same object by the same function.
func sameCall(want *recording.Step, got recording.Event) *recording.Event {
	for i := range want.Events {
		e := &want.Events[i]
		if e.Type != recording.EventCall || e.Fn != got.Fn {
			continue
		}
		switch got.Fn {
		case abi.ImportGet:
			if bytes.Equal(e.In, got.In) {
				return e
			}
		case abi.ImportList:
			if bytes.Equal(e.In, got.In) || sameList(e.In, got.In) {
				return e
			}
		case abi.ImportEvent:
		default:
			if recording.ObjectOf(e.Fn, e.In) == recording.ObjectOf(got.Fn, got.In) {
				r := *e
				r.In = got.In
				return &r
			}
		}
	}
	return nil
}

// Rerun runs a recorded reconcile on m, another build of the plugin than the recorded one: the
// steps its instance ran before it, then the reconcile, answered from the recording as far as
// it can (see rerunner), to see what this build would have done. It returns the reconcile as
// this build ran it, to compare with the recorded one (recording.Compare).
func (m *Module) Rerun(ctx context.Context, before []*recording.Step, step *recording.Step) (*recording.Step, error) {
	got, err := m.RerunSteps(ctx, append(before[:len(before):len(before)], step))
	if err != nil {
		return nil, err
	}
	return got[len(got)-1], nil
}

// rerunSeed seeds the random bytes a rerun gives past the recorded ones.
var rerunSeed = sha256.Sum256([]byte("wasmrec rerun"))

// RerunSteps is Rerun of every reconcile of an instance's steps, its _initialize first, on one
// new instance: what this build did at each, at the same index (nil for the other kinds).
func (m *Module) RerunSteps(ctx context.Context, steps []*recording.Step) ([]*recording.Step, error) {
	if len(steps) == 0 || steps[0].Kind != recording.StepInitialize {
		return nil, errors.New("the recording does not start with its instance's _initialize")
	}
	select {
	case <-m.tokens:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	rp := &replayer{steps: steps, rerun: &rerunner{seed: rerunSeed}}
	inst, err := m.newInstance(ctx, rp)
	if err != nil {
		m.tokens <- struct{}{}
		return nil, err
	}
	defer m.put(inst, false)
	out := make([]*recording.Step, len(steps))
	for i, want := range steps[1:] {
		switch want.Kind {
		case recording.StepManifest:
			_, _ = inst.readManifest(ctx)
		case recording.StepReconcile, recording.StepMap:
			if err := inst.runStep(ctx, rp.at, want); err != nil {
				return nil, err
			}
			if want.Kind == recording.StepReconcile {
				out[i+1] = inst.step
			}
			inst.endStep()
		default:
			return nil, fmt.Errorf("step %d is of kind %q: only the first may be an _initialize", rp.at, want.Kind)
		}
		_ = rp.endStep(nil)
	}
	if out[len(out)-1] == nil {
		return nil, errors.New("the recording holds no reconcile to rerun")
	}
	return out, nil
}

// sameList reports whether two list requests ask for the same items: the index values a guest
// tells with a list (abi.ListRequest.Indexed) follow what its instance computed before, which a
// rerun on a new instance did not, and change nothing of the answer the guest sees.
func sameList(a, b []byte) bool {
	var ra, rb abi.ListRequest
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil {
		return false
	}
	ra.Indexed, rb.Indexed = nil, nil
	return reflect.DeepEqual(ra, rb)
}
