//go:build wasip1

package wasmrec

import (
	"context"
	"unsafe"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

//go:wasmimport wasmrec read
func wasmRead(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmrec log
func wasmLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport wasmrec get
func wasmGet(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec list
func wasmList(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec create
func wasmCreate(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec update
func wasmUpdate(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec update_status
func wasmUpdateStatus(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec patch
func wasmPatch(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec delete
func wasmDelete(ptr unsafe.Pointer, n uint32) uint64

//go:wasmimport wasmrec event
func wasmEvent(ptr unsafe.Pointer, n uint32) uint64

var calls = map[string]func(unsafe.Pointer, uint32) uint64{
	abi.ImportGet: wasmGet, abi.ImportList: wasmList, abi.ImportCreate: wasmCreate,
	abi.ImportUpdate: wasmUpdate, abi.ImportUpdateStatus: wasmUpdateStatus, abi.ImportPatch: wasmPatch,
	abi.ImportDelete: wasmDelete, abi.ImportEvent: wasmEvent,
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// readPending copies the host's pending buffer of n bytes.
func readPending(n uint32) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	if got := wasmRead(ptr(b), n); got < 0 {
		panic("wasmrec: the host refused to hand over its pending buffer")
	}
	return b
}

func hostCall(fn string, req []byte) (abi.Status, []byte) {
	status, n := abi.UnpackStatusLen(calls[fn](ptr(req), uint32(len(req))))
	return status, readPending(n)
}

func hostLog(level int32, line []byte) {
	wasmLog(level, ptr(line), uint32(len(line)))
}

//go:wasmexport wasmrec_abi_v1
func abiV1() {}

// manifestBytes holds the manifest's JSON for the host to copy.
var manifestBytes []byte

//go:wasmexport wasmrec_manifest
func manifest() uint64 {
	if registered.r == nil {
		panic("wasmrec: no reconciler registered: call wasmrec.Register from init")
	}
	if manifestBytes == nil {
		manifestBytes = manifestJSON()
	}
	m := manifestBytes
	return abi.PackPtrLen(uint32(uintptr(ptr(m))), uint32(len(m)))
}

// result holds the last result envelope until the host has copied it.
var result []byte

//go:wasmexport wasmrec_reconcile
func reconcile(n uint32) uint64 {
	req, err := abi.DecodeRequest(readPending(n))
	if err != nil {
		panic("wasmrec: " + err.Error())
	}
	debugKept.Store(!req.DropsDebug)
	res, rerr := registered.r.Reconcile(context.Background(), Request{NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, Retries: int(req.Retries)})
	result = encodeResult(result, res, rerr)
	if result == nil {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(ptr(result))), uint32(len(result)))
}

// mapped holds the last map result until the host has copied it.
var mapped []byte

//go:wasmexport wasmrec_map
func mapExport(watch, n uint32) uint64 {
	mapped = mapObject(mapped, watch, readPending(n))
	if len(mapped) == 0 {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(ptr(mapped))), uint32(len(mapped)))
}
