/* A plugin written against the raw ABI (no SDK) that misbehaves on request, by the name of the
 * object it reconciles: "trap", "loop" (logs "looping", then loops for ever), "bomb" (grows memory until the cap), "garbage" (a result
 * pointing outside memory), "badflags" (a result with unknown flags), "forbidden" (deletes a
 * Secret it never asked for and logs the status it got), "slow" (spins ~50M iterations, then
 * succeeds), "spin" (logs "spinning", then spins ~2G iterations without a host call, seconds), "sleep" (logs "sleeping", sleeps 2s, logs "slept"), "sleep-N" (the same for N seconds), "nap-*" (sleeps 100ms, then
 * logs "napped <name>"), "chatty" (prints 100,000 lines of 128 bytes to stdout), "flood" (prints
 * 100 MiB to stdout, then asks to be reconciled again 1ms later), "unknownkinds" (gets 1000
 * kinds no API server serves, logs how many were refused, and asks again 10ms later), "hog-<n>"
 * (grows its memory by n MiB, writes every byte of it, logs "hogging <n> MiB" and succeeds). Any other name reconciles
 * cleanly. It reconciles ConfigMaps labelled
 * wasmrec.dev/misbehave. */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("read") int32_t host_read(void *ptr, uint32_t len);
IMPORT("log") void host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("delete") uint64_t host_delete(const void *ptr, uint32_t len);
IMPORT("get") uint64_t host_get(const void *ptr, uint32_t len);

static const char manifest[] =
    "{\"name\":\"misbehave\","
    "\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"predicates\":[{\"type\":\"LabelSelector\","
    "\"selector\":{\"matchExpressions\":[{\"key\":\"wasmrec.dev/misbehave\",\"operator\":\"Exists\"}]}}]},"
    "\"permissions\":[{\"group\":\"\",\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}";

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)(uintptr_t)p << 32) | n; }

EXPORT("wasmrec_abi_v1") void abi_v1(void) {}
EXPORT("wasmrec_manifest") uint64_t get_manifest(void) { return pack(manifest, sizeof manifest - 1); }

static unsigned char req[512];
static unsigned char badflags[16] = {0x80};
static unsigned char again_in_1ms[16] = {[8] = 0x40, [9] = 0x42, [10] = 0x0f}; /* requeueAfter 1e6 ns */
static unsigned char again_in_10ms[16] = {[8] = 0x80, [9] = 0x96, [10] = 0x98}; /* requeueAfter 1e7 ns */
static char scratch[1024];

EXPORT("wasmrec_reconcile") uint64_t reconcile(uint32_t n) {
  if (n > sizeof req - 1 || host_read(req, sizeof req) < 0) __builtin_trap();
  uint32_t ns_len = req[0] | req[1] << 8, name_len = req[4] | req[5] << 8;
  char ns[256] = {0}, name[256] = {0};
  memcpy(ns, req + 16, ns_len < 255 ? ns_len : 255);
  memcpy(name, req + 16 + ns_len, name_len < 255 ? name_len : 255);

  if (!strcmp(name, "trap")) __builtin_trap();
  if (!strcmp(name, "loop")) {
    host_log(1, "looping", 7);
    volatile unsigned long i = 0;
    for (;;) i++;
  }
  if (!strcmp(name, "slow")) {
    volatile unsigned long i = 0;
    while (i < 50000000ul) i++;
  }
  if (!strcmp(name, "spin")) {
    host_log(1, "spinning", 8);
    volatile unsigned long i = 0;
    while (i < 2000000000ul) i++;
  }
  if (!strcmp(name, "sleep")) {
    host_log(1, "sleeping", 8);
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
    host_log(1, "slept", 5);
  }
  if (!strncmp(name, "sleep-", 6)) { /* sleep-20: 20 s */
    host_log(1, "sleeping", 8);
    struct timespec ts = {atoi(name + 6), 0};
    nanosleep(&ts, NULL);
    host_log(1, "slept", 5);
  }
  if (!strncmp(name, "nap-", 4)) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    char line[300];
    int n = snprintf(line, sizeof line, "napped %s", name);
    host_log(1, line, n);
  }
  if (!strcmp(name, "chatty")) {
    char line[129];
    for (int i = 0; i < 16; i++) memcpy(line + 8 * i, "chatter ", 8);
    line[127] = '\n';
    for (int i = 0; i < 100000; i++) fwrite(line, 1, 128, stdout);
    fflush(stdout);
  }
  if (!strcmp(name, "flood")) {
    char line[129];
    for (int i = 0; i < 16; i++) memcpy(line + 8 * i, "flooding", 8);
    line[127] = '\n';
    for (int i = 0; i < 100 * 8192; i++) fwrite(line, 1, 128, stdout);
    fflush(stdout);
    return pack(again_in_1ms, sizeof again_in_1ms);
  }
  if (!strcmp(name, "unknownkinds")) {
    /* 1000 gets of kinds no API server serves, then again 10 ms later */
    int refused = 0;
    for (int i = 0; i < 1000; i++) {
      int len = snprintf(scratch, sizeof scratch, "{\"apiVersion\":\"v1\",\"kind\":\"Nope%d\",\"namespace\":\"%s\",\"name\":\"x\"}", i, ns);
      if ((uint32_t)(host_get(scratch, (uint32_t)len) >> 32) != 0) refused++;
    }
    int len = snprintf(scratch, sizeof scratch, "looked up 1000 unknown kinds: %d refused", refused);
    host_log(1, scratch, (uint32_t)len);
    return pack(again_in_10ms, sizeof again_in_10ms);
  }
  if (!strncmp(name, "hog-", 4)) {
    /* grows its memory by <n> MiB and touches every page, then succeeds: the instance keeps it */
    int mib = 0;
    for (const char *c = name + 4; *c >= '0' && *c <= '9'; c++) mib = mib * 10 + (*c - '0');
    __SIZE_TYPE__ old = __builtin_wasm_memory_grow(0, (__SIZE_TYPE__)mib * 16);
    if (old == (__SIZE_TYPE__)-1) __builtin_trap();
    memset((void *)(old * 65536), 1, (__SIZE_TYPE__)mib << 20);
    int len = snprintf(scratch, sizeof scratch, "hogging %d MiB", mib);
    host_log(1, scratch, (uint32_t)len);
    return 0;
  }
  if (!strcmp(name, "bomb")) {
    while (__builtin_wasm_memory_grow(0, 16) != (__SIZE_TYPE__)-1) {
    }
    __builtin_trap();
  }
  if (!strcmp(name, "garbage")) return pack((void *)0xfffff000u, 64);
  if (!strcmp(name, "badflags")) return pack(badflags, sizeof badflags);
  if (!strcmp(name, "forbidden")) {
    int len = snprintf(scratch, sizeof scratch, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"namespace\":\"%s\",\"name\":\"precious\"}", ns);
    uint64_t r = host_delete(scratch, (uint32_t)len);
    uint32_t status = (uint32_t)(r >> 32), rlen = (uint32_t)r;
    char msg[512] = {0};
    if (rlen < sizeof msg) host_read(msg, sizeof msg - 1);
    len = snprintf(scratch, sizeof scratch, "delete secret returned status %u: %s", status, msg);
    host_log(2, scratch, (uint32_t)len);
  }
  return 0;
}
