package hostcalls

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wasmrec/wasmrec/host/object"
)

// protobufObject is an object's answer to a get asking for protobuf, or nil, false to answer
// its JSON (object.ProtobufOf says when).
func protobufObject(gvk schema.GroupVersionKind, o *object.Object) ([]byte, bool) {
	return o.Protobuf(gvk)
}

// protobufList is a list's answer asking for protobuf: gvk's List type holding items, in
// order; nil, false to answer JSON (no List type, an item the types do not hold whole). The
// List's message is put together from the items' own encodings (made once per object, as for a
// get): its metadata (field 1, empty, as the JSON answer has none), then each item (field 2), as
// the List type encodes itself, which listOfItems checks once per kind.
func protobufList(gvk schema.GroupVersionKind, items []*object.Object) ([]byte, bool) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if !listOfItems(gvk, listGVK) {
		return nil, false
	}
	raws := make([][]byte, len(items))
	size := len(emptyListMeta)
	for i, it := range items {
		env, ok := it.Protobuf(gvk)
		if !ok {
			return nil, false
		}
		raw, ok := unknownRaw(env)
		if !ok {
			return nil, false
		}
		raws[i] = raw
		size += 1 + binary.MaxVarintLen64 + len(raw)
	}
	return protobufListOf(listGVK, raws, size)
}

var protobufMagic = []byte("k8s\x00")

// unknownRaw is the raw object (field 2) of the runtime.Unknown in an envelope, not copied.
func unknownRaw(env []byte) ([]byte, bool) {
	b, ok := bytes.CutPrefix(env, protobufMagic)
	for ok && len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			raw, n := protowire.ConsumeBytes(b)
			return raw, n >= 0
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return nil, false
}

// emptyListMeta is a List's field 1, its ListMeta, empty.
var emptyListMeta = func() []byte {
	lm, err := (&metav1.ListMeta{}).Marshal()
	if err != nil || len(lm) >= 0x80 {
		panic(fmt.Sprintf("an empty ListMeta encodes as %q (%v)", lm, err))
	}
	return append([]byte{1<<3 | 2, byte(len(lm))}, lm...)
}()

func protobufListOf(listGVK schema.GroupVersionKind, raws [][]byte, size int) ([]byte, bool) {
	msg := make([]byte, 0, size)
	msg = append(msg, emptyListMeta...)
	for _, raw := range raws {
		msg = append(msg, 2<<3|2)
		msg = binary.AppendUvarint(msg, uint64(len(raw)))
		msg = append(msg, raw...)
	}
	return object.EncodeProtobuf(&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: listGVK.GroupVersion().String(), Kind: listGVK.Kind}, Raw: msg})
}

// listsOfItems caches listOfItems, by List kind.
var listsOfItems sync.Map

// listOfItems reports whether listGVK, gvk's List, is a type of client-go's scheme that encodes
// as protobufListOf puts it together: it encodes one with two items both ways and compares them.
func listOfItems(gvk, listGVK schema.GroupVersionKind) bool {
	if ok, found := listsOfItems.Load(listGVK); found {
		return ok.(bool)
	}
	ok := func() bool {
		list, err := scheme.Scheme.New(listGVK)
		if err != nil || !meta.IsListType(list) {
			return false
		}
		items := make([]runtime.Object, 2)
		raws := make([][]byte, 2)
		for i := range items {
			item, err := scheme.Scheme.New(gvk)
			if err != nil {
				return false
			}
			m, err := meta.Accessor(item)
			if err != nil {
				return false
			}
			m.SetName("item")
			m.SetLabels(map[string]string{"i": string(rune('a' + i))})
			env, ok := object.EncodeProtobuf(item)
			if !ok {
				return false
			}
			if raws[i], ok = unknownRaw(env); !ok {
				return false
			}
			items[i] = item
		}
		if meta.SetList(list, items) != nil {
			return false
		}
		list.GetObjectKind().SetGroupVersionKind(listGVK)
		want, ok := object.EncodeProtobuf(list)
		got, ok2 := protobufListOf(listGVK, raws, 0)
		return ok && ok2 && bytes.Equal(want, got)
	}()
	listsOfItems.Store(listGVK, ok)
	return ok
}
