package client

import (
	"errors"
	"fmt"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
	"github.com/wasmrec/wasmrec/sdk/go/internal/strategic"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Patch is a patch of an object: its type (abi.PatchMerge...) and its JSON, made from the
// object being patched.
type Patch interface {
	Type() string
	Data(obj Object) ([]byte, error)
}

type rawPatch struct {
	typ  string
	data []byte
}

func (p rawPatch) Type() string                { return p.typ }
func (p rawPatch) Data(Object) ([]byte, error) { return p.data, nil }

// RawPatch is a patch written out: patchType is types.MergePatchType, JSONPatchType or
// StrategicMergePatchType (package github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types;
// the content types controller-runtime's RawPatch takes), or the ABI's name of one
// (abi.PatchMerge...). A strategic merge patch that adds an item to a list merged by key (a
// container, an env var) puts it first, before the items the object had, as the API server
// does; $setElementOrder says where it goes.
func RawPatch(patchType types.PatchType, data []byte) Patch {
	t := string(patchType)
	switch patchType {
	case types.MergePatchType:
		t = abi.PatchMerge
	case types.JSONPatchType:
		t = abi.PatchJSON
	case types.StrategicMergePatchType:
		t = abi.PatchStrategic
	case types.ApplyPatchType:
		t = abi.PatchApply
	}
	return rawPatch{t, data}
}

type applyPatch struct{}

func (applyPatch) Type() string { return abi.PatchApply }
func (applyPatch) Data(obj Object) ([]byte, error) {
	return encode(obj)
}

// Apply server-side applies the object as it is: the fields it holds become the plugin's (the
// field manager is the plugin's name). With ForceOwnership it takes fields other managers own.
var Apply Patch = applyPatch{}

// MergeFromOptions are the options of MergeFrom and StrategicMergeFrom.
type MergeFromOptions struct {
	// OptimisticLock puts the original's resourceVersion in the patch.
	OptimisticLock bool
}

// MergeFromOption is an option of MergeFrom and StrategicMergeFrom.
type MergeFromOption interface{ ApplyToMergeFrom(*MergeFromOptions) }

// MergeFromWithOptimisticLock puts the original's resourceVersion in the patch, so that the
// API server refuses it (a conflict) if the object changed since it was read:
// client.MergeFrom(orig, client.MergeFromWithOptimisticLock{}).
type MergeFromWithOptimisticLock struct{}

// ApplyToMergeFrom sets OptimisticLock.
func (MergeFromWithOptimisticLock) ApplyToMergeFrom(o *MergeFromOptions) { o.OptimisticLock = true }

type mergeFrom struct {
	from Object
	lock bool
}

// MergeFrom is the JSON merge patch (RFC 7386) that turns original into the object being
// patched: what changed, with null for what was removed. Lists are replaced whole, as merge
// patches replace them. Take original as a DeepCopy before changing the object.
func MergeFrom(original Object, opts ...MergeFromOption) Patch {
	return mergeFrom{from: original, lock: locked(opts)}
}

func (m mergeFrom) Type() string { return abi.PatchMerge }

func (m mergeFrom) Data(obj Object) ([]byte, error) {
	return diffPatch(m.from, obj, m.lock, func(a, b map[string]any) (map[string]any, error) {
		return jsonv.MergePatch(a, b), nil
	})
}

type strategicMergeFrom mergeFrom

// StrategicMergeFrom is the strategic merge patch that turns original into the object being
// patched, as controller-runtime's StrategicMergeFrom computes it: a list Kubernetes merges by
// a key (a pod's containers by name, its volumes, env and ports, conditions by type) holds only
// the items that changed, so that items others added since original was read are kept. Take
// original as a DeepCopy before changing the object. Only the built-in kinds of sdk/go/k8s have
// what it needs (their patch metadata); the API server takes no strategic merge patch of a
// custom resource: use MergeFrom for those.
func StrategicMergeFrom(original Object, opts ...MergeFromOption) Patch {
	return strategicMergeFrom{from: original, lock: locked(opts)}
}

func (m strategicMergeFrom) Type() string { return abi.PatchStrategic }

func (m strategicMergeFrom) Data(obj Object) ([]byte, error) {
	fields, ok := obj.(codec.PatchFields)
	if !ok {
		return nil, fmt.Errorf("StrategicMergeFrom: a %T has no patch metadata: strategic merge patches are for the built-in kinds of sdk/go/k8s, and the API server takes none for a custom resource; use MergeFrom", obj)
	}
	return diffPatch(m.from, obj, m.lock, func(a, b map[string]any) (map[string]any, error) {
		p, err := strategic.TwoWay(a, b, fields)
		if err != nil {
			return nil, fmt.Errorf("StrategicMergeFrom: %w", err)
		}
		return p, nil
	})
}

func locked(opts []MergeFromOption) bool {
	var o MergeFromOptions
	for _, opt := range opts {
		opt.ApplyToMergeFrom(&o)
	}
	return o.OptimisticLock
}

// diffPatch is the patch diff makes of from and obj, with from's resourceVersion if lock.
func diffPatch(from, obj Object, lock bool, diff func(a, b map[string]any) (map[string]any, error)) ([]byte, error) {
	if from == nil {
		return nil, errors.New("the original object is nil: pass a DeepCopy of the object as it was read")
	}
	before, err := codec.Marshal(from)
	if err != nil {
		return nil, err
	}
	after, err := codec.Marshal(obj)
	if err != nil {
		return nil, err
	}
	a, err := jsonv.DecodeObjectExact(before)
	if err != nil {
		return nil, err
	}
	b, err := jsonv.DecodeObjectExact(after)
	if err != nil {
		return nil, err
	}
	p, err := diff(a, b)
	if err != nil {
		return nil, err
	}
	if lock {
		rv := from.GetResourceVersion()
		if rv == "" {
			return nil, errors.New("MergeFromWithOptimisticLock: the original has no resourceVersion (read it from the cluster first)")
		}
		meta, _ := p["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			p["metadata"] = meta
		}
		meta["resourceVersion"] = rv
	}
	out, err := jsonv.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return out, nil
}
