/* A raw-ABI plugin for a custom kind, Thing (follow.wasmrec.dev/v1): it logs "reconciled
 * <namespace>/<name>" for each Thing. The CRD-following tests install and remove its CRD. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__attribute__((import_module("wasmrec"), import_name("read"))) int32_t host_read(void *ptr, uint32_t len);
__attribute__((import_module("wasmrec"), import_name("log"))) void host_log(int32_t level, const void *ptr, uint32_t len);

static const char m[] = "{\"name\":\"follow\",\"for\":{\"apiVersion\":\"follow.wasmrec.dev/v1\",\"kind\":\"Thing\"},"
                        "\"permissions\":[{\"group\":\"follow.wasmrec.dev\",\"resources\":[\"things\"],\"verbs\":[\"list\",\"watch\"]}]}";
static unsigned char req[512];
static char line[600];

__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) {
  if (n > sizeof req - 1 || host_read(req, sizeof req) < 0) __builtin_trap();
  uint32_t ns_len = req[0] | req[1] << 8, name_len = req[4] | req[5] << 8;
  int len = snprintf(line, sizeof line, "reconciled %.*s/%.*s", (int)ns_len, req + 16, (int)name_len, req + 16 + ns_len);
  host_log(1, line, (uint32_t)len);
  return 0;
}
