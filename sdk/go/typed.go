package wasmrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/wasmrec/wasmrec/abi"
)

// protoMessage is what k8s.io/api's generated protobuf code gives its types (and their Lists):
// a value of one is read in the Kubernetes protobuf encoding, which decodes without reflection,
// where the host has it. MarshalToSizedBuffer is there to tell generated code from a type whose
// Unmarshal reads some other encoding.
type protoMessage interface {
	Unmarshal([]byte) error
	MarshalToSizedBuffer([]byte) (int, error)
}

// asksProtobuf reports whether a get (list) into v asks for protobuf: v has the generated
// methods and its type is named for the kind (a Deployment, a DeploymentList), so that its
// message is the one the host sends. Any other type is read from JSON, as it always was.
func asksProtobuf(v any, typeName string) bool {
	if _, ok := v.(protoMessage); !ok {
		return false
	}
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name() == typeName
}

// decodeTyped decodes a get's (or list's) answer into v: protobuf, if the host answered it
// (it does only when asked, and only for the built-in kinds it has types of), or JSON.
// apiVersion and kind are what was asked: where protobuf leaves out an item's TypeMeta that
// JSON holds, they are set, so that v is what JSON would have made of it.
//
// A value with the protobuf methods is zeroed first, as proto.Unmarshal resets a message, so that
// it ends the same whichever encoding the host answered: the generated Unmarshal appends to
// lists (a reused Deployment would gain containers), where encoding/json replaces them.
func decodeTyped(resp []byte, v any, apiVersion, kind string, list bool) error {
	m, ok := v.(protoMessage)
	if ok {
		if p := reflect.ValueOf(v); p.Kind() == reflect.Pointer && !p.IsNil() {
			p.Elem().SetZero()
		}
	}
	if !ok || !bytes.HasPrefix(resp, []byte(abi.ProtobufMagic)) {
		return json.Unmarshal(resp, v)
	}
	typeMeta, raw, err := unknownEnvelope(resp[len(abi.ProtobufMagic):])
	if err != nil {
		return fmt.Errorf("the protobuf answer: %w", err)
	}
	if err := m.Unmarshal(raw); err != nil {
		return err
	}
	if !list {
		gotAPIVersion, gotKind, err := typeMetaOf(typeMeta)
		if err != nil {
			return fmt.Errorf("the protobuf answer's TypeMeta: %w", err)
		}
		setTypeMeta(reflect.ValueOf(v), gotAPIVersion, gotKind)
		return nil
	}
	// A list's JSON answer is {"items": [...]}, each item with its apiVersion and kind, and the
	// List's own TypeMeta empty.
	if items := elem(reflect.ValueOf(v)).FieldByName("Items"); items.Kind() == reflect.Slice {
		for i := range items.Len() {
			setTypeMeta(items.Index(i), apiVersion, kind)
		}
	}
	return nil
}

// elem is the struct v points to (or v), or the zero Value.
func elem(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v
}

// setTypeMeta sets the APIVersion and Kind of v's embedded TypeMeta, if it has one.
func setTypeMeta(v reflect.Value, apiVersion, kind string) {
	s := elem(v)
	if !s.IsValid() {
		return
	}
	f := typeMetaFieldsOf(s.Type())
	if f.typeMeta < 0 {
		return
	}
	tm := s.Field(f.typeMeta)
	if f.apiVersion >= 0 {
		tm.Field(f.apiVersion).SetString(apiVersion)
	}
	if f.kind >= 0 {
		tm.Field(f.kind).SetString(kind)
	}
}

// typeMetaFields are the indexes of a struct's TypeMeta field and of its APIVersion and Kind
// string fields; -1 for none.
type typeMetaFields struct{ typeMeta, apiVersion, kind int }

var typeMetaFieldsByType sync.Map // reflect.Type -> typeMetaFields

func typeMetaFieldsOf(t reflect.Type) typeMetaFields {
	if f, ok := typeMetaFieldsByType.Load(t); ok {
		return f.(typeMetaFields)
	}
	f := typeMetaFields{-1, -1, -1}
	if tm, ok := t.FieldByName("TypeMeta"); ok && len(tm.Index) == 1 && tm.IsExported() && tm.Type.Kind() == reflect.Struct {
		field := func(name string) int {
			sf, ok := tm.Type.FieldByName(name)
			if !ok || len(sf.Index) != 1 || !sf.IsExported() || sf.Type.Kind() != reflect.String {
				return -1
			}
			return sf.Index[0]
		}
		f = typeMetaFields{tm.Index[0], field("APIVersion"), field("Kind")}
	}
	typeMetaFieldsByType.Store(t, f)
	return f
}

// unknownEnvelope reads a runtime.Unknown message: its TypeMeta (field 1) and raw object
// (field 2). Fields 3 and 4 (content encoding and type) and any other are skipped.
func unknownEnvelope(b []byte) (typeMeta, raw []byte, err error) {
	err = protoFields(b, func(field uint64, v []byte) {
		switch field {
		case 1:
			typeMeta = v
		case 2:
			raw = v
		}
	})
	if err == nil && raw == nil {
		err = errors.New("runtime.Unknown has no raw object (field 2)")
	}
	return typeMeta, raw, err
}

// typeMetaOf reads a runtime.TypeMeta message: apiVersion (field 1) and kind (field 2).
func typeMetaOf(b []byte) (apiVersion, kind string, err error) {
	err = protoFields(b, func(field uint64, v []byte) {
		switch field {
		case 1:
			apiVersion = string(v)
		case 2:
			kind = string(v)
		}
	})
	return apiVersion, kind, err
}

// protoFields calls f with each length-delimited field of a protobuf message, in order, and
// skips fields of the other wire types.
func protoFields(b []byte, f func(field uint64, v []byte)) error {
	for len(b) > 0 {
		tag, n := uvarint(b)
		if n <= 0 {
			return errors.New("truncated field tag")
		}
		b = b[n:]
		field, wire := tag>>3, tag&7
		if field == 0 {
			return errors.New("field number 0")
		}
		switch wire {
		case 0: // varint
			if _, n = uvarint(b); n <= 0 {
				return fmt.Errorf("field %d: truncated varint", field)
			}
			b = b[n:]
		case 1: // 64-bit
			if len(b) < 8 {
				return fmt.Errorf("field %d: truncated 64-bit value", field)
			}
			b = b[8:]
		case 5: // 32-bit
			if len(b) < 4 {
				return fmt.Errorf("field %d: truncated 32-bit value", field)
			}
			b = b[4:]
		case 2: // length-delimited
			l, n := uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("field %d: length past the end of the message", field)
			}
			f(field, b[n:n+int(l)])
			b = b[n+int(l):]
		default:
			return fmt.Errorf("field %d: wire type %d", field, wire)
		}
	}
	return nil
}

// uvarint reads a protobuf varint: the value and the bytes it took, or n <= 0 if b ends first
// or it is longer than 10 bytes.
func uvarint(b []byte) (v uint64, n int) {
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
