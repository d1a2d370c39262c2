/* A raw-ABI plugin that reads a Secret in every reconcile: for each ConfigMap labelled
 * wasmrec.dev/readsecret it gets the Secret of the same name and namespace, logs "get secret
 * <name> returned status <n> after <ms> ms: <message>", and fails the reconcile (so that it is
 * retried) unless the get succeeded. Its manifest asks for get, list and watch on ConfigMaps and
 * Secrets. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("read") int32_t host_read(void *ptr, uint32_t len);
IMPORT("log") void host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("get") uint64_t host_get(const void *ptr, uint32_t len);

static const char manifest[] =
    "{\"name\":\"readsecret\","
    "\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"predicates\":[{\"type\":\"LabelSelector\","
    "\"selector\":{\"matchExpressions\":[{\"key\":\"wasmrec.dev/readsecret\",\"operator\":\"Exists\"}]}}]},"
    "\"permissions\":[{\"group\":\"\",\"resources\":[\"configmaps\",\"secrets\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}";

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)(uintptr_t)p << 32) | n; }

EXPORT("wasmrec_abi_v1") void abi_v1(void) {}
EXPORT("wasmrec_manifest") uint64_t get_manifest(void) { return pack(manifest, sizeof manifest - 1); }

static unsigned char req[512];
static char scratch[1024];
static char resp[2048];
static const char failed[] = "reading the secret failed";
static unsigned char result[16 + sizeof failed - 1] = {[0] = 2 /* error */, [4] = sizeof failed - 1};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

EXPORT("wasmrec_reconcile") uint64_t reconcile(uint32_t n) {
  if (n > sizeof req - 1 || host_read(req, sizeof req) < 0) __builtin_trap();
  uint32_t ns_len = req[0] | req[1] << 8, name_len = req[4] | req[5] << 8;
  char ns[256] = {0}, name[256] = {0};
  memcpy(ns, req + 16, ns_len < 255 ? ns_len : 255);
  memcpy(name, req + 16 + ns_len, name_len < 255 ? name_len : 255);

  int len = snprintf(scratch, sizeof scratch, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"namespace\":\"%s\",\"name\":\"%s\"}", ns, name);
  int64_t start = now_ms();
  uint64_t r = host_get(scratch, (uint32_t)len);
  int64_t took = now_ms() - start;
  uint32_t status = (uint32_t)(r >> 32), rlen = (uint32_t)r;
  memset(resp, 0, sizeof resp);
  if (rlen < sizeof resp) host_read(resp, sizeof resp - 1);
  if (status == 0) resp[0] = 0; /* the Secret itself: not for the log */
  len = snprintf(scratch, sizeof scratch, "get secret %s returned status %u after %lld ms: %s", name, status, (long long)took, resp);
  host_log(1, scratch, (uint32_t)(len < (int)sizeof scratch ? len : (int)sizeof scratch - 1));
  if (status != 0) {
    memcpy(result + 16, failed, sizeof failed - 1);
    return pack(result, sizeof result);
  }
  return 0;
}
