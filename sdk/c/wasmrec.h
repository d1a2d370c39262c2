/* wasmrec C SDK: write a wasmrec plugin (ABI v1, see abi/ABI.md) in C.
 *
 * A plugin defines two functions and links wasmrec.c:
 *
 *   const char *wasmrec_plugin_manifest(void);               // the manifest JSON
 *   wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req);
 *
 * Build: clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 \
 *          -I sdk/c -o plugin.wasm plugin.c sdk/c/wasmrec.c
 */
#ifndef WASMREC_H
#define WASMREC_H

#include <stddef.h>
#include <stdint.h>

/* Statuses of host calls (abi.Status). */
enum {
  WASMREC_OK = 0,
  WASMREC_NOT_FOUND = 1,
  WASMREC_ALREADY_EXISTS = 2,
  WASMREC_CONFLICT = 3,
  WASMREC_FORBIDDEN = 4,
  WASMREC_INVALID = 5,
  WASMREC_TOO_LARGE = 6,
  WASMREC_TIMEOUT = 7,
  WASMREC_UNAVAILABLE = 8,
  WASMREC_BAD_REQUEST = 9,
  WASMREC_INTERNAL = 10,
};

/* Log levels. */
enum { WASMREC_DEBUG = 0, WASMREC_INFO = 1, WASMREC_WARN = 2, WASMREC_ERROR = 3 };

/* The request: NUL-terminated copies, valid during the reconcile. */
typedef struct {
  const char *namespace_; /* "" for a cluster-scoped object */
  const char *name;
  uint32_t retries; /* retries with backoff in a row (failures and requeues) before this one */
} wasmrec_request;

/* The result. Set failed (and message) for an error; terminal to not retry. */
typedef struct {
  int requeue;
  int64_t requeue_after_ns;
  int failed;
  int terminal;
  const char *message; /* copied by the SDK */
} wasmrec_result;

/* The answer of a host call: data is NUL-terminated and malloc'd; free it with
 * wasmrec_response_free. On a status other than WASMREC_OK, data is the host's message. */
typedef struct {
  uint32_t status;
  char *data;
  uint32_t len;
} wasmrec_response;

void wasmrec_response_free(wasmrec_response *r);

/* Host calls; each takes the request JSON of abi/ABI.md. */
wasmrec_response wasmrec_get(const char *request_json);
wasmrec_response wasmrec_list(const char *request_json);
wasmrec_response wasmrec_create(const char *object_json);
wasmrec_response wasmrec_update(const char *object_json);
wasmrec_response wasmrec_update_status(const char *object_json);
wasmrec_response wasmrec_patch(const char *request_json);
wasmrec_response wasmrec_delete(const char *request_json);
wasmrec_response wasmrec_event(const char *request_json);

void wasmrec_log(int level, const char *msg);

/* A growable string for building JSON. */
typedef struct {
  char *s;
  size_t len, cap;
} wasmrec_buf;

void wasmrec_buf_str(wasmrec_buf *b, const char *s);         /* append raw text */
void wasmrec_buf_fmt(wasmrec_buf *b, const char *fmt, ...);  /* append printf-formatted text */
void wasmrec_buf_json_string(wasmrec_buf *b, const char *s); /* append s as a quoted JSON string */
void wasmrec_buf_free(wasmrec_buf *b);

/* JSON lookups by a dotted path ("spec.port"). They return 0 if the path is missing or has
 * another type. */
int wasmrec_json_string(const char *json, const char *path, char **out); /* out is malloc'd */
int wasmrec_json_int(const char *json, const char *path, int64_t *out);

/* Defined by the plugin. */
const char *wasmrec_plugin_manifest(void);
wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req);

#endif
