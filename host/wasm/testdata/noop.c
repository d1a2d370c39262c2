/* The smallest ABI v1 plugin: reads its request and succeeds. The benchmarks' C guest. */
#include <stdint.h>
__attribute__((import_module("wasmrec"), import_name("read"))) int32_t host_read(void *ptr, uint32_t len);
static const char m[] = "{\"name\":\"noop\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
static unsigned char req[512];
__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) {
  if (n > sizeof req) __builtin_trap();
  host_read(req, sizeof req);
  return 0;
}
