/* A plugin whose manifest maps a watch by a function it does not export: refused at load. */
#include <stdint.h>
static const char m[] = "{\"name\":\"mapnoexport\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"},"
                        "\"watches\":[{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"map\":\"func\"}]}";
__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) { return 0; }
