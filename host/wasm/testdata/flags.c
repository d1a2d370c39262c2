/* A module that logs, at info level, the flags word of each request envelope it is given:
   what the host tells the guest (abi.Request.DropsDebug). */
#include <stdint.h>
__attribute__((import_module("wasmrec"), import_name("read"))) int32_t host_read(void *ptr, uint32_t len);
__attribute__((import_module("wasmrec"), import_name("log"))) void host_log(int32_t level, const void *ptr, uint32_t len);
static const char m[] = "{\"name\":\"flags\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
static unsigned char req[512];
static char line[] = "flags=?";
__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) {
  if (n > sizeof req || n < 16) __builtin_trap();
  host_read(req, sizeof req);
  uint32_t flags = req[12] | req[13] << 8 | req[14] << 16 | (uint32_t)req[15] << 24;
  line[6] = flags < 10 ? '0' + flags : '+';
  host_log(1, line, sizeof line - 1);
  return 0;
}
