package client

import (
	"context"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// MapWatch is wasmrec.MapWatch for a typed kind: a Watch of PT's kind, whose events enqueue the
// requests fn returns for the object, decoded into a new T. It is controller-runtime's
// Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(fn)), with fn taking the
// typed object:
//
//	Watches: []wasmrec.Watch{client.MapWatch(r.deploymentsUsing)},
//	...
//	func (r *reconciler) deploymentsUsing(ctx context.Context, cm *corev1.ConfigMap) []wasmrec.Request
//
// fn may Get and List (a List with MatchingFields of an index is the usual way to find the
// objects that refer to obj) but not write. A kind has one map function: two MapWatch of one
// kind in a manifest are refused by wasmrec.Register.
func MapWatch[T any, PT interface {
	*T
	Object
}](fn func(ctx context.Context, obj PT) []wasmrec.Request, predicates ...wasmrec.Predicate) wasmrec.Watch {
	apiVersion, kind := PT(new(T)).APIVersionKind()
	return wasmrec.MapWatchJSON(apiVersion, kind, func(ctx context.Context, b []byte) ([]wasmrec.Request, error) {
		obj := PT(new(T))
		if err := codec.UnmarshalKeep(b, obj); err != nil {
			return nil, err
		}
		return fn(ctx, obj), nil
	}, predicates...)
}
