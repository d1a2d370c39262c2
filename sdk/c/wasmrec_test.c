/* Native tests of the C SDK's JSON helpers (the parts that need no host): `make test` builds
 * this with the host's clang and runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

/* The host imports, which these tests never reach. */
int32_t wasmrec_host_read(void *ptr, uint32_t len) { abort(); }
void wasmrec_host_log(int32_t level, const void *ptr, uint32_t len) { abort(); }
#define NO_HOST(name) \
  uint64_t name(const void *ptr, uint32_t len) { abort(); }
NO_HOST(wasmrec_host_get)
NO_HOST(wasmrec_host_list)
NO_HOST(wasmrec_host_create)
NO_HOST(wasmrec_host_update)
NO_HOST(wasmrec_host_update_status)
NO_HOST(wasmrec_host_patch)
NO_HOST(wasmrec_host_delete)
NO_HOST(wasmrec_host_event)
const char *wasmrec_plugin_manifest(void) { return "{}"; }
wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) { return (wasmrec_result){0}; }

static int checks, failures;

static void want_string(const char *json, const char *path, const char *want) {
  char *got = NULL;
  int ok = wasmrec_json_string(json, path, &got);
  checks++;
  if (want == NULL ? ok : !ok || strcmp(got, want) != 0) {
    failures++;
    fprintf(stderr, "FAIL wasmrec_json_string(%s, %s) = %d %s, want %s\n", json, path, ok, ok ? got : "-",
            want ? want : "missing");
  }
  free(got);
}

static void want_int(const char *json, const char *path, int ok_want, int64_t want) {
  int64_t got = 0;
  int ok = wasmrec_json_int(json, path, &got);
  checks++;
  if (ok != ok_want || (ok && got != want)) {
    failures++;
    fprintf(stderr, "FAIL wasmrec_json_int(%s, %s) = %d %lld, want %d %lld\n", json, path, ok, (long long)got, ok_want,
            (long long)want);
  }
}

static void want_built(const char *s, const char *want) {
  wasmrec_buf b = {0};
  wasmrec_buf_json_string(&b, s);
  checks++;
  if (strcmp(b.s, want) != 0) {
    failures++;
    fprintf(stderr, "FAIL wasmrec_buf_json_string(%s) = %s, want %s\n", s, b.s, want);
  }
  wasmrec_buf_free(&b);
}

int main(void) {
  const char *pod = "{\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"web\"}},"
                    "\"spec\":{\"replicas\":3,\"containers\":[{\"name\":\"a\",\"image\":\"img:0\"},"
                    "{\"name\":\"b\",\"image\":\"img:1\",\"ports\":[{\"containerPort\":8080}]}]}}";
  want_string(pod, "metadata.name", "web");
  want_string(pod, "metadata.labels.app", "web");
  want_int(pod, "spec.replicas", 1, 3);
  want_string(pod, "spec.containers.0.image", "img:0");
  want_string(pod, "spec.containers.1.image", "img:1");
  want_int(pod, "spec.containers.1.ports.0.containerPort", 1, 8080);
  want_string(pod, "spec.containers.2.image", NULL);  /* past the end */
  want_string(pod, "spec.containers.x.image", NULL);  /* not an index */
  want_string(pod, "spec.containers.-1.image", NULL);
  want_string(pod, "spec.containers.", NULL);
  want_string(pod, "spec.replicas.0", NULL);          /* not an array */
  want_string(pod, "metadata.0", NULL);               /* an object is not indexed */
  want_string(pod, "spec.missing", NULL);
  want_int(pod, "metadata.name", 0, 0);               /* a string is not an int */
  want_string(pod, "spec.replicas", NULL);            /* an int is not a string */
  want_string("{\"a\":[]}", "a.0", NULL);
  want_int("[[1,2],[3,4]]", "1.0", 1, 3);
  want_int(" { \"a\" : [ 1 , -2 ] } ", "a.1", 1, -2);
  want_string("{\"s\":\"q\\\"b\\\\n\\n\\u0041\\u00e9\"}", "s", "q\"b\\n\nA\xc3\xa9");
  want_string("{\"a\":{\"b\":1},\"b\":\"top\"}", "b", "top"); /* a key of a nested object is not matched */
  want_string("{\"a\":\"unterminated", "a", NULL);
  want_string("not json", "a", NULL);

  want_built("plain", "\"plain\"");
  want_built("q\"b\\\n\t\x01", "\"q\\\"b\\\\\\n\\t\\u0001\"");

  if (failures) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("ok  sdk/c: %d checks\n", checks);
  return 0;
}
