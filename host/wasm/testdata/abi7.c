/* A module that speaks a future ABI: the host must refuse it, naming both versions. */
#include <stdint.h>
__attribute__((export_name("wasmrec_abi_v7"))) void abi_v7(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return 0; }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) { return 0; }
