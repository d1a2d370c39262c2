/* A raw-ABI plugin that reads the clocks: each reconcile logs "monotonic <ns> realtime <s>",
 * the WASI monotonic clock in nanoseconds and the wall clock in seconds since the epoch. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

__attribute__((import_module("wasmrec"), import_name("read"))) int32_t host_read(void *ptr, uint32_t len);
__attribute__((import_module("wasmrec"), import_name("log"))) void host_log(int32_t level, const void *ptr, uint32_t len);

static const char m[] = "{\"name\":\"clock\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
static unsigned char req[512];
static char line[128];

__attribute__((export_name("wasmrec_abi_v1"))) void abi_v1(void) {}
__attribute__((export_name("wasmrec_manifest"))) uint64_t manifest(void) { return ((uint64_t)(uintptr_t)m << 32) | (sizeof m - 1); }
__attribute__((export_name("wasmrec_reconcile"))) uint64_t reconcile(uint32_t n) {
  if (n > sizeof req || host_read(req, sizeof req) < 0) __builtin_trap();
  struct timespec mono, wall;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &wall);
  int len = snprintf(line, sizeof line, "monotonic %lld realtime %lld", (long long)mono.tv_sec * 1000000000 + mono.tv_nsec, (long long)wall.tv_sec);
  host_log(1, line, (uint32_t)len);
  return 0;
}
