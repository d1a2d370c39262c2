package wasmrec

import (
	"context"
	"fmt"

	"github.com/wasmrec/wasmrec/abi"
)

// MapFunc maps an object of a watched kind to the requests of the For objects its change
// concerns, as controller-runtime's handler.MapFunc does. It runs in the plugin, on the host's
// event path, once for each create, delete and generic event and twice for an update (the old
// object and the new, each object with its own answer): keep it to a few reads. It may Get and
// List (from the host's cache, as a reconcile does) but not write: the host answers a write
// with bad request. Return nil to enqueue nothing.
type MapFunc func(ctx context.Context, obj *Object) []Request

// MapWatch is a Watch of apiVersion/kind whose events enqueue the requests fn returns:
// controller-runtime's Watches(obj, handler.EnqueueRequestsFromMapFunc(fn)). Put it in the
// manifest's Watches. A kind has one map function: a later MapWatch of the kind replaces it,
// and Register refuses a manifest with two watches of one kind mapped by functions. Package client's MapWatch gives fn the object typed.
func MapWatch(apiVersion, kind string, fn MapFunc, predicates ...Predicate) Watch {
	return MapWatchJSON(apiVersion, kind, func(ctx context.Context, object []byte) ([]Request, error) {
		var o Object
		if err := o.UnmarshalJSON(object); err != nil {
			return nil, err
		}
		return fn(ctx, &o), nil
	}, predicates...)
}

// MapWatchJSON is MapWatch for a function that decodes the object's JSON itself. object is
// the function's own. An error enqueues nothing and is logged.
func MapWatchJSON(apiVersion, kind string, fn func(ctx context.Context, object []byte) ([]Request, error), predicates ...Predicate) Watch {
	if registered.maps == nil {
		registered.maps = map[string]func(context.Context, []byte) ([]Request, error){}
	}
	registered.maps[apiVersion+"/"+kind] = fn
	return Watch{APIVersion: apiVersion, Kind: kind, Map: abi.MapFunc, Predicates: predicates}
}

// checkMaps says which watch of m is mapped by a function that no MapWatch gave, or by the
// same function as another watch of its kind.
func checkMaps(m Manifest) error {
	first := map[string]int{}
	for i, w := range m.Watches {
		if w.Map != abi.MapFunc {
			continue
		}
		key := w.APIVersion + "/" + w.Kind
		if _, ok := registered.maps[key]; !ok {
			return fmt.Errorf("watches[%d] (%s %s): its map is %q but it has no map function: make the watch with MapWatch", i, w.APIVersion, w.Kind, abi.MapFunc)
		}
		if j, dup := first[key]; dup {
			return fmt.Errorf("watches[%d] and watches[%d] both map %s %s by a function, and a kind has one map function (the later MapWatch replaced the earlier): map it in one function", j, i, w.APIVersion, w.Kind)
		}
		first[key] = i
	}
	return nil
}

// mapObject runs the map function of the manifest's watches[watch] on object, and appends the
// requests it returns to buf as the ABI's request envelopes.
func mapObject(buf []byte, watch uint32, object []byte) []byte {
	ws := registered.m.Watches
	if int(watch) >= len(ws) {
		panic(fmt.Sprintf("wasmrec: the host asked to map an object of watches[%d]; the manifest has %d watches", watch, len(ws)))
	}
	w := ws[watch]
	fn := registered.maps[w.APIVersion+"/"+w.Kind]
	if fn == nil {
		panic(fmt.Sprintf("wasmrec: the host asked to map an object of watches[%d] (%s %s), which has no map function", watch, w.APIVersion, w.Kind))
	}
	reqs, err := fn(context.Background(), object)
	if err != nil {
		Log.Error(err, "the map function could not read the object: the event enqueues nothing", "kind", w.Kind)
		return buf[:0]
	}
	buf = buf[:0]
	for _, r := range reqs {
		if r.Name == "" {
			Log.Warn("the map function returned a request without a name: dropped", "kind", w.Kind, "namespace", r.Namespace)
			continue
		}
		buf = abi.AppendRequest(buf, abi.Request{Namespace: r.Namespace, Name: r.Name})
	}
	return buf
}
