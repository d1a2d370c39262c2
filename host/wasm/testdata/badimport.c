/* An ABI v1 module that imports a function the host does not have. */
#include <stdint.h>
__attribute__((import_module("env"), import_name("launch_missiles"))) void launch(void);
static const char m[] = "{\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) { launch(); return 0; }
