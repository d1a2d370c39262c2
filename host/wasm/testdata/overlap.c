/* The guest of the scale-out e2e (e2e/scaleout_test.go): for each ConfigMap it logs "overlap
 * begin", copies data.gen into the annotation overlap/seen unless it is there already, works a
 * few milliseconds, and logs "overlap end". The host stamps both lines with the time and the
 * request, so a checker reading every replica's log can tell whether two replicas ever
 * reconciled one key at once, and the annotation tells whether a change was reconciled.
 *
 * Built as variants, the new versions of the rollout e2e (e2e/rollout_test.go):
 *   V2           does the same, from other bytes: a good new version.
 *   FAIL_TENTH   fails on a tenth of the keys (by a hash of the name), and on the others always
 *                writes the annotation overlap/candidate besides overlap/seen.
 *   WRITE_OTHER  writes overlap/seen as data.gen followed by "x": a different write. */
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"overlap\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"},"
         "\"permissions\":[{\"group\":\"\",\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\",\"watch\",\"patch\"]}]}";
}

static volatile unsigned long sink;

#ifdef V2
#define WORK 3000001
#else
#define WORK 3000000
#endif

/* About 5 ms of work: a window wide enough for an overlap to show. */
static void work(void) {
  for (unsigned long i = 0; i < WORK; i++) sink += i;
}

#ifdef FAIL_TENTH
static int failing(const char *name) {
  unsigned long h = 2166136261u;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  return h % 10 == 0;
}
#endif

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  wasmrec_log(WASMREC_INFO, "overlap begin");
  wasmrec_result res = {0};
  wasmrec_buf ref = {0};
  wasmrec_buf_str(&ref, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":");
  wasmrec_buf_json_string(&ref, req->namespace_);
  wasmrec_buf_str(&ref, ",\"name\":");
  wasmrec_buf_json_string(&ref, req->name);
  wasmrec_buf get = {0};
  wasmrec_buf_fmt(&get, "%s}", ref.s);
  wasmrec_response r = wasmrec_get(get.s);
  wasmrec_buf_free(&get);
#ifdef FAIL_TENTH
  if (failing(req->name)) {
    wasmrec_response_free(&r);
    wasmrec_buf_free(&ref);
    work();
    wasmrec_log(WASMREC_INFO, "overlap end");
    return (wasmrec_result){.failed = 1, .message = "failing on purpose"};
  }
#endif
  if (r.status == WASMREC_OK) {
    char *gen = NULL, *seen = NULL;
    wasmrec_json_string(r.data, "data.gen", &gen);
    wasmrec_json_string(r.data, "metadata.annotations.overlap/seen", &seen);
    wasmrec_buf want = {0};
    if (gen) wasmrec_buf_str(&want, gen);
#ifdef WRITE_OTHER
    wasmrec_buf_str(&want, "x");
#endif
#ifdef FAIL_TENTH
    int always = 1;
#else
    int always = 0;
#endif
    if (gen && (always || !seen || strcmp(want.s, seen) != 0)) {
      wasmrec_buf patch = {0};
      wasmrec_buf_fmt(&patch, "%s,\"type\":\"merge\",\"patch\":{\"metadata\":{\"annotations\":{", ref.s);
      if (always) wasmrec_buf_str(&patch, "\"overlap/candidate\":\"fail-tenth\",");
      wasmrec_buf_str(&patch, "\"overlap/seen\":");
      wasmrec_buf_json_string(&patch, want.s);
      wasmrec_buf_str(&patch, "}}}}");
      wasmrec_response p = wasmrec_patch(patch.s);
      if (p.status != WASMREC_OK && p.status != WASMREC_NOT_FOUND) res = (wasmrec_result){.failed = 1, .message = "patch failed"};
      wasmrec_response_free(&p);
      wasmrec_buf_free(&patch);
    }
    wasmrec_buf_free(&want);
    free(gen);
    free(seen);
  } else if (r.status != WASMREC_NOT_FOUND) {
    res = (wasmrec_result){.failed = 1, .message = "get failed"};
  }
  wasmrec_response_free(&r);
  wasmrec_buf_free(&ref);
  work();
  wasmrec_log(WASMREC_INFO, "overlap end");
  return res;
}
