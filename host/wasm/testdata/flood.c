/* A plugin written against the raw ABI that floods what the host logs for it, as a tenant
 * might: it reconciles ConfigMaps labelled wasmrec.dev/flood; for one named "event.<n>" it
 * records an Event whose message is <n> bytes and logs "event.<n> returned status <s>: <answer>";
 * for one named "fail.<n>" it fails with an error message of <n> bytes (at most 64 KiB, the
 * ABI's bound), so that the host retries it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("read") int32_t host_read(void *ptr, uint32_t len);
IMPORT("log") void host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("event") uint64_t host_event(const void *ptr, uint32_t len);

static const char manifest[] =
    "{\"name\":\"flood\","
    "\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"predicates\":[{\"type\":\"LabelSelector\","
    "\"selector\":{\"matchExpressions\":[{\"key\":\"wasmrec.dev/flood\",\"operator\":\"Exists\"}]}}]},"
    "\"permissions\":[{\"group\":\"\",\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\",\"watch\"]},"
    "{\"group\":\"\",\"resources\":[\"events\"],\"verbs\":[\"create\"]}]}";

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)(uintptr_t)p << 32) | n; }

EXPORT("wasmrec_abi_v1") void abi_v1(void) {}
EXPORT("wasmrec_manifest") uint64_t get_manifest(void) { return pack(manifest, sizeof manifest - 1); }

#define MAX_MSG (64 << 10)
static unsigned char req[512];
static char body[MAX_MSG + 256], answer[1025], line[1400];
static unsigned char result[16 + MAX_MSG];

EXPORT("wasmrec_reconcile") uint64_t reconcile(uint32_t n) {
  if (n > sizeof req - 1 || host_read(req, sizeof req) < 0) __builtin_trap();
  uint32_t ns_len = req[0] | req[1] << 8, name_len = req[4] | req[5] << 8;
  char name[256] = {0};
  memcpy(name, req + 16 + ns_len, name_len < 255 ? name_len : 255);
  if (!strncmp(name, "event.", 6)) {
    int size = atoi(name + 6);
    if (size < 0 || size > MAX_MSG) size = MAX_MSG;
    int len = snprintf(body, sizeof body, "{\"type\":\"Warning\",\"reason\":\"Flood\",\"message\":\"");
    memset(body + len, 'x', (size_t)size);
    len += size;
    len += snprintf(body + len, sizeof body - (size_t)len, "\"}");
    uint64_t r = host_event(body, (uint32_t)len);
    uint32_t status = (uint32_t)(r >> 32), rlen = (uint32_t)r;
    memset(answer, 0, sizeof answer);
    if (rlen > 0) host_read(answer, sizeof answer - 1);
    len = snprintf(line, sizeof line, "%s returned status %u: %s", name, status, answer);
    host_log(2, line, (uint32_t)len);
    return 0;
  }
  if (!strncmp(name, "fail.", 5)) {
    int size = atoi(name + 5);
    if (size < 1 || size > MAX_MSG) size = MAX_MSG;
    memset(result, 0, 16);
    result[0] = 2; /* FlagError */
    result[4] = (unsigned char)size, result[5] = (unsigned char)(size >> 8), result[6] = (unsigned char)(size >> 16);
    memset(result + 16, 'e', (size_t)size);
    return pack(result, 16 + (uint32_t)size);
  }
  return 0;
}
