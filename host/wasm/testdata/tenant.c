/* A plugin written against the raw ABI that tries to read what its author may not: it is granted
 * and asks for get, list and watch on every core resource ("*"), reconciles ConfigMaps labelled
 * wasmrec.dev/tenant, and for one named "get.<namespace>.<name>" gets that Secret, for one named
 * "list.<namespace>" lists the Secrets there, then logs "<what> returned status <n>: <answer>"
 * (the first 2048 bytes of the answer). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("read") int32_t host_read(void *ptr, uint32_t len);
IMPORT("log") void host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("get") uint64_t host_get(const void *ptr, uint32_t len);
IMPORT("list") uint64_t host_list(const void *ptr, uint32_t len);

static const char manifest[] =
    "{\"name\":\"tenant\","
    "\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"predicates\":[{\"type\":\"LabelSelector\","
    "\"selector\":{\"matchExpressions\":[{\"key\":\"wasmrec.dev/tenant\",\"operator\":\"Exists\"}]}}]},"
    "\"permissions\":[{\"group\":\"\",\"resources\":[\"*\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}";

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)(uintptr_t)p << 32) | n; }

EXPORT("wasmrec_abi_v1") void abi_v1(void) {}
EXPORT("wasmrec_manifest") uint64_t get_manifest(void) { return pack(manifest, sizeof manifest - 1); }

static unsigned char req[512];
static char scratch[1024], answer[2049], line[2400];

EXPORT("wasmrec_reconcile") uint64_t reconcile(uint32_t n) {
  if (n > sizeof req - 1 || host_read(req, sizeof req) < 0) __builtin_trap();
  uint32_t ns_len = req[0] | req[1] << 8, name_len = req[4] | req[5] << 8;
  char name[256] = {0};
  memcpy(name, req + 16 + ns_len, name_len < 255 ? name_len : 255);
  uint64_t r;
  if (!strncmp(name, "get.", 4)) {
    char *ns = name + 4, *dot = strchr(ns, '.');
    if (!dot) return 0;
    *dot = 0;
    int len = snprintf(scratch, sizeof scratch, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"namespace\":\"%s\",\"name\":\"%s\"}", ns, dot + 1);
    r = host_get(scratch, (uint32_t)len);
    *dot = '.';
  } else if (!strncmp(name, "list.", 5)) {
    int len = snprintf(scratch, sizeof scratch, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"namespace\":\"%s\"}", name + 5);
    r = host_list(scratch, (uint32_t)len);
  } else {
    return 0;
  }
  uint32_t status = (uint32_t)(r >> 32), rlen = (uint32_t)r;
  memset(answer, 0, sizeof answer);
  if (rlen > 0) host_read(answer, sizeof answer - 1);
  int len = snprintf(line, sizeof line, "%s returned status %u: %s", name, status, answer);
  host_log(2, line, (uint32_t)len);
  return 0;
}
