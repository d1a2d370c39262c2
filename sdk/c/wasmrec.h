/* wasmrec C SDK: write a wasmrec plugin (ABI v1, see abi/ABI.md) in C.
 *
 * A plugin defines two functions and links wasmrec.c:
 *
 *   const char *wasmrec_plugin_manifest(void);               // the manifest JSON
 *   wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req);
 *
 * and a third if a watch of its manifest is mapped by the plugin ("map": "func"):
 *
 *   void wasmrec_plugin_map(uint32_t watch, const char *object, uint32_t len);
 *
 * Build: clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 \
 *          -I sdk/c -o plugin.wasm plugin.c sdk/c/wasmrec.c
 */
#ifndef WASMREC_H
#define WASMREC_H

#include <stdarg.h>
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

/* Host calls; each takes the request JSON of abi/ABI.md. create, update and update_status take
   the object, or with write options {"object": {...}, "fieldOwner": "...", "dryRun": true}
   (ABI.md, "Write options"); patch and delete take those options beside their fields. */
wasmrec_response wasmrec_get(const char *request_json);
wasmrec_response wasmrec_list(const char *request_json);
wasmrec_response wasmrec_create(const char *object_json);
wasmrec_response wasmrec_update(const char *object_json);
wasmrec_response wasmrec_update_status(const char *object_json);
wasmrec_response wasmrec_patch(const char *request_json);
wasmrec_response wasmrec_delete(const char *request_json);
wasmrec_response wasmrec_event(const char *request_json);

void wasmrec_log(int level, const char *msg);

/* Whether a line at level goes anywhere: 0 for WASMREC_DEBUG while the host keeps none of this
 * reconcile's debug lines (its log is at info level and it does not record the plugin). The log
 * functions then return at once; test it before building a costly debug line yourself. */
int wasmrec_log_enabled(int level);

/* A log line with key/values: NULL-terminated pairs of const char * key and value, the values
 * strings (a NULL value is logged as null), all JSON-escaped by the SDK:
 *
 *   wasmrec_log_kv(WASMREC_INFO, "scaled", "deployment", name, "replicas", "3", NULL);
 *
 * The host gets the message, a NUL and a JSON array of the keys and values
 * ("scaled\0[\"deployment\",\"web\",\"replicas\",\"3\"]"); with no pairs, just the message.
 * The whole line counts toward the 64 KiB the host keeps of a message. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((sentinel))
#endif
void wasmrec_log_kv(int level, const char *msg, ...);
void wasmrec_log_kvv(int level, const char *msg, va_list ap); /* the same with a va_list */

/* A growable string for building JSON. */
typedef struct {
  char *s;
  size_t len, cap;
} wasmrec_buf;

void wasmrec_buf_str(wasmrec_buf *b, const char *s);         /* append raw text */
void wasmrec_buf_fmt(wasmrec_buf *b, const char *fmt, ...);  /* append printf-formatted text */
void wasmrec_buf_json_string(wasmrec_buf *b, const char *s); /* append s as a quoted JSON string */
void wasmrec_buf_free(wasmrec_buf *b);

/* JSON lookups by a dotted path ("spec.port"; a segment of digits indexes an array,
 * "spec.containers.0.image"; "" or NULL is json itself). They return 0 if the path is missing
 * or has another type. Keys are compared with their escapes resolved. A key that holds a dot
 * (most label and annotation keys: "app.kubernetes.io/name") cannot be named in a path: walk
 * the map with wasmrec_json_iter_init and wasmrec_json_next instead. They read only the value
 * at the start of json, so they also take a value_json of wasmrec_json_next as it is.
 *
 * wasmrec_json_string resolves every escape (\" \\ \/ \b \f \n \r \t \uXXXX, surrogate pairs
 * to 4-byte UTF-8) and returns 0, setting nothing, for a bad escape, a lone or malformed
 * surrogate and \u0000 (out is NUL-terminated, so a NUL in it would cut it silently). */
int wasmrec_json_string(const char *json, const char *path, char **out); /* out is malloc'd */
int wasmrec_json_int(const char *json, const char *path, int64_t *out);

/* Walking the members of an object or the items of an array at a dotted path (as above):
 *
 *   wasmrec_json_iter it;
 *   const char *key, *value;
 *   size_t len;
 *   wasmrec_json_iter_init(&it, json, "metadata.labels");
 *   while (wasmrec_json_next(&it, &key, &value, &len)) { ... }
 *   if (it.error) { ... malformed JSON ... }
 *
 * wasmrec_json_iter_init returns 0 if the path is missing, is not an object or array, or the
 * container is malformed or truncated (it is checked whole first; it.error is then set, and
 * containers nested more than 512 deep count as malformed); next then returns 0 at once.
 * wasmrec_json_next returns 1 with the next member: key is its name with escapes resolved
 * (NULL for an array item), valid until the next call; value points into json at the value's
 * JSON text, len bytes long (not NUL-terminated, but the lookups and wasmrec_json_iter_init
 * can take it as it is). It returns 0 at the end, or with it.error set for a key that does not
 * decode (as in wasmrec_json_string); by then it has freed what it held. To stop early, call
 * wasmrec_json_iter_free (harmless after the end). Nothing is read past json's NUL. */
typedef struct {
  int error; /* set if the walk stopped on malformed JSON */
  /* private */
  const char *p;
  int object;
  char *key;
  size_t key_cap;
} wasmrec_json_iter;

int wasmrec_json_iter_init(wasmrec_json_iter *it, const char *json, const char *path);
int wasmrec_json_next(wasmrec_json_iter *it, const char **key, const char **value_json, size_t *value_len);
void wasmrec_json_iter_free(wasmrec_json_iter *it);

/* The host's imports (module "wasmrec", abi/ABI.md), which the functions above call. In a
 * module (clang --target=wasm32-wasi) they are imported from the host. Compiled natively, for a
 * unit test of plugin code, the wasm attributes are left out (no warning) and these are plain
 * functions the test defines, answering as the host would: read copies the pending response,
 * the calls return status << 32 | response length. To test a whole plugin against a cluster in
 * memory instead, with no stub to write, build the module and run `wasmrec test`. */
#if defined(__wasm__)
#define WASMREC_IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#else
#define WASMREC_IMPORT(name)
#endif
WASMREC_IMPORT("read") int32_t wasmrec_host_read(void *ptr, uint32_t len);
WASMREC_IMPORT("log") void wasmrec_host_log(int32_t level, const void *ptr, uint32_t len);
WASMREC_IMPORT("get") uint64_t wasmrec_host_get(const void *ptr, uint32_t len);
WASMREC_IMPORT("list") uint64_t wasmrec_host_list(const void *ptr, uint32_t len);
WASMREC_IMPORT("create") uint64_t wasmrec_host_create(const void *ptr, uint32_t len);
WASMREC_IMPORT("update") uint64_t wasmrec_host_update(const void *ptr, uint32_t len);
WASMREC_IMPORT("update_status") uint64_t wasmrec_host_update_status(const void *ptr, uint32_t len);
WASMREC_IMPORT("patch") uint64_t wasmrec_host_patch(const void *ptr, uint32_t len);
WASMREC_IMPORT("delete") uint64_t wasmrec_host_delete(const void *ptr, uint32_t len);
WASMREC_IMPORT("event") uint64_t wasmrec_host_event(const void *ptr, uint32_t len);

/* Defined by the plugin. */
const char *wasmrec_plugin_manifest(void);
wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req);

/* Map functions. An event of a manifest watch with "map": "func" enqueues what the plugin's
 * wasmrec_plugin_map adds with wasmrec_map_add for the object. Define it if the manifest has
 * such a watch (it is weak: a plugin without one need not). watch is the watch's index in the
 * manifest's "watches", object its JSON, NUL-terminated, len bytes, valid during the call. It
 * may call wasmrec_get and wasmrec_list; a write is answered WASMREC_BAD_REQUEST. */
void wasmrec_plugin_map(uint32_t watch, const char *object, uint32_t len) __attribute__((weak));
/* wasmrec_map_add enqueues the For object namespace_/name (namespace_ "" or NULL for a
 * cluster-scoped one); call it from wasmrec_plugin_map. Returns 0, or -1 for an empty name or
 * when out of memory (the request is not added). */
int wasmrec_map_add(const char *namespace_, const char *name);

#endif
