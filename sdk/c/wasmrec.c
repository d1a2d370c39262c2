/* wasmrec C SDK: the ABI v1 exports, host-call wrappers and a little JSON. */
#include "wasmrec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("wasmrec"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("read") int32_t wasmrec_host_read(void *ptr, uint32_t len);
IMPORT("log") void wasmrec_host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("get") uint64_t wasmrec_host_get(const void *ptr, uint32_t len);
IMPORT("list") uint64_t wasmrec_host_list(const void *ptr, uint32_t len);
IMPORT("create") uint64_t wasmrec_host_create(const void *ptr, uint32_t len);
IMPORT("update") uint64_t wasmrec_host_update(const void *ptr, uint32_t len);
IMPORT("update_status") uint64_t wasmrec_host_update_status(const void *ptr, uint32_t len);
IMPORT("patch") uint64_t wasmrec_host_patch(const void *ptr, uint32_t len);
IMPORT("delete") uint64_t wasmrec_host_delete(const void *ptr, uint32_t len);
IMPORT("event") uint64_t wasmrec_host_event(const void *ptr, uint32_t len);

EXPORT("wasmrec_abi_v1") void wasmrec_abi_v1(void) {}

static uint64_t pack(const void *ptr, uint32_t len) {
  return ((uint64_t)(uintptr_t)ptr << 32) | len;
}

/* read_pending copies the host's pending buffer (n bytes) into a NUL-terminated malloc'd copy. */
static char *read_pending(uint32_t n) {
  char *b = malloc((size_t)n + 1);
  if (!b) __builtin_trap();
  if (n > 0 && wasmrec_host_read(b, n) < 0) __builtin_trap();
  b[n] = 0;
  return b;
}

EXPORT("wasmrec_manifest") uint64_t wasmrec_manifest(void) {
  const char *m = wasmrec_plugin_manifest();
  return pack(m, (uint32_t)strlen(m));
}

static uint8_t *result_buf;

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A request envelope (16 bytes, a namespace of at most 63 and a name of at most 253) fits
 * here, so a reconcile needs no malloc for its key. A longer one goes to the heap. */
static char request_buf[512];

EXPORT("wasmrec_reconcile") uint64_t wasmrec_reconcile(uint32_t n) {
  if (n < 16) __builtin_trap();
  /* The envelope is read to the end of the buffer, then its two strings are moved to the front
   * with their NULs (n - 14 bytes: always before where they came from). */
  int small = (size_t)n + 2 <= sizeof request_buf;
  size_t size = small ? sizeof request_buf : (size_t)n + 2;
  char *buf = small ? request_buf : malloc(size);
  if (!buf) __builtin_trap();
  uint8_t *env = (uint8_t *)buf + size - n;
  if (wasmrec_host_read(env, n) < 0) __builtin_trap();
  uint32_t ns_len = get32(env), name_len = get32(env + 4), retries = get32(env + 8);
  if ((uint64_t)ns_len + name_len != n - 16) __builtin_trap();
  char *ns = buf, *name = buf + ns_len + 1;
  memmove(ns, env + 16, ns_len);
  ns[ns_len] = 0;
  memmove(name, env + 16 + ns_len, name_len);
  name[name_len] = 0;
  wasmrec_request req = {.namespace_ = ns, .name = name, .retries = retries};
  wasmrec_result res = wasmrec_plugin_reconcile(&req);
  if (!small) free(buf);

  if (!res.failed && !res.requeue && res.requeue_after_ns <= 0) return 0;
  uint32_t flags = 0, msg_len = 0;
  if (res.failed) {
    flags = 2 | (res.terminal ? 4 : 0);
    if (!res.message) res.message = "error";
    msg_len = (uint32_t)strlen(res.message);
    if (msg_len > 65536) msg_len = 65536;
  } else if (res.requeue) {
    flags = 1;
  }
  int64_t after = res.failed || res.requeue_after_ns < 0 ? 0 : res.requeue_after_ns;
  free(result_buf);
  result_buf = malloc(16 + msg_len);
  if (!result_buf) __builtin_trap();
  put32(result_buf, flags);
  put32(result_buf + 4, msg_len);
  put32(result_buf + 8, (uint32_t)after);
  put32(result_buf + 12, (uint32_t)((uint64_t)after >> 32));
  if (msg_len) memcpy(result_buf + 16, res.message, msg_len);
  return pack(result_buf, 16 + msg_len);
}

static wasmrec_response call(uint64_t (*fn)(const void *, uint32_t), const char *req) {
  uint64_t r = fn(req, (uint32_t)strlen(req));
  wasmrec_response out = {.status = (uint32_t)(r >> 32), .len = (uint32_t)r};
  out.data = read_pending(out.len);
  return out;
}

void wasmrec_response_free(wasmrec_response *r) {
  free(r->data);
  r->data = NULL;
}

wasmrec_response wasmrec_get(const char *r) { return call(wasmrec_host_get, r); }
wasmrec_response wasmrec_list(const char *r) { return call(wasmrec_host_list, r); }
wasmrec_response wasmrec_create(const char *r) { return call(wasmrec_host_create, r); }
wasmrec_response wasmrec_update(const char *r) { return call(wasmrec_host_update, r); }
wasmrec_response wasmrec_update_status(const char *r) { return call(wasmrec_host_update_status, r); }
wasmrec_response wasmrec_patch(const char *r) { return call(wasmrec_host_patch, r); }
wasmrec_response wasmrec_delete(const char *r) { return call(wasmrec_host_delete, r); }
wasmrec_response wasmrec_event(const char *r) { return call(wasmrec_host_event, r); }

void wasmrec_log(int level, const char *msg) { wasmrec_host_log(level, msg, (uint32_t)strlen(msg)); }

/* --- building JSON --- */

static void grow(wasmrec_buf *b, size_t n) {
  if (b->len + n + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1) cap *= 2;
  b->s = realloc(b->s, cap);
  if (!b->s) __builtin_trap();
  b->cap = cap;
}

void wasmrec_buf_str(wasmrec_buf *b, const char *s) {
  size_t n = strlen(s);
  grow(b, n);
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

void wasmrec_buf_fmt(wasmrec_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  grow(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void wasmrec_buf_json_string(wasmrec_buf *b, const char *s) {
  wasmrec_buf_str(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': wasmrec_buf_str(b, "\\\""); break;
    case '\\': wasmrec_buf_str(b, "\\\\"); break;
    case '\n': wasmrec_buf_str(b, "\\n"); break;
    case '\r': wasmrec_buf_str(b, "\\r"); break;
    case '\t': wasmrec_buf_str(b, "\\t"); break;
    default:
      if (*p < 0x20) {
        wasmrec_buf_fmt(b, "\\u%04x", *p);
      } else {
        char c[2] = {(char)*p, 0};
        wasmrec_buf_str(b, c);
      }
    }
  }
  wasmrec_buf_str(b, "\"");
}

void wasmrec_buf_free(wasmrec_buf *b) {
  free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
}

/* --- reading JSON: just enough to find a value by path --- */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
  return p;
}

/* skip_string returns the character after the closing quote of the string starting at p. */
static const char *skip_string(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1]) p++;
  return *p ? p + 1 : NULL;
}

static const char *skip_value(const char *p) {
  p = ws(p);
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"' || !(p = skip_string(p))) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      if (!(p = skip_value(p))) return NULL;
      p = ws(p);
      if (*p == ',') { p = ws(p + 1); continue; }
      return *p == close ? p + 1 : NULL;
    }
  }
  while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n') p++;
  return p;
}

/* find returns where the value at path starts, or NULL. A segment of digits indexes an array
 * ("spec.containers.0.image"). */
static const char *find(const char *json, const char *path) {
  const char *p = ws(json);
  while (*path) {
    const char *dot = strchr(path, '.');
    size_t klen = dot ? (size_t)(dot - path) : strlen(path);
    if (*p == '[') {
      size_t index = 0, i;
      for (i = 0; i < klen && path[i] >= '0' && path[i] <= '9'; i++) index = index * 10 + (size_t)(path[i] - '0');
      if (klen == 0 || i != klen) return NULL;
      p = ws(p + 1);
      if (*p == ']') return NULL;
      for (; index > 0; index--) {
        if (!(p = skip_value(p))) return NULL;
        p = ws(p);
        if (*p != ',') return NULL;
        p = ws(p + 1);
      }
      path = dot ? dot + 1 : path + klen;
      continue;
    }
    if (*p != '{') return NULL;
    p = ws(p + 1);
    const char *found = NULL;
    while (*p == '"') {
      const char *kend = skip_string(p);
      if (!kend) return NULL;
      int match = (size_t)(kend - p - 2) == klen && strncmp(p + 1, path, klen) == 0;
      p = ws(kend);
      if (*p++ != ':') return NULL;
      p = ws(p);
      if (match) { found = p; break; }
      if (!(p = skip_value(p))) return NULL;
      p = ws(p);
      if (*p == ',') p = ws(p + 1);
    }
    if (!found) return NULL;
    p = found;
    path = dot ? dot + 1 : path + klen;
  }
  return p;
}

int wasmrec_json_string(const char *json, const char *path, char **out) {
  const char *p = find(json, path);
  if (!p || *p != '"') return 0;
  const char *end = skip_string(p);
  if (!end) return 0;
  char *s = malloc((size_t)(end - p)), *w = s;
  for (const char *r = p + 1; r < end - 1; r++) {
    if (*r != '\\') { *w++ = *r; continue; }
    switch (*++r) {
    case 'n': *w++ = '\n'; break;
    case 't': *w++ = '\t'; break;
    case 'r': *w++ = '\r'; break;
    case 'u': {
      unsigned cp = 0;
      sscanf(r + 1, "%4x", &cp);
      r += 4;
      if (cp < 0x80) *w++ = (char)cp;
      else if (cp < 0x800) { *w++ = (char)(0xc0 | cp >> 6); *w++ = (char)(0x80 | (cp & 0x3f)); }
      else { *w++ = (char)(0xe0 | cp >> 12); *w++ = (char)(0x80 | ((cp >> 6) & 0x3f)); *w++ = (char)(0x80 | (cp & 0x3f)); }
      break;
    }
    default: *w++ = *r;
    }
  }
  *w = 0;
  *out = s;
  return 1;
}

int wasmrec_json_int(const char *json, const char *path, int64_t *out) {
  const char *p = find(json, path);
  if (!p || !(*p == '-' || (*p >= '0' && *p <= '9'))) return 0;
  *out = strtoll(p, NULL, 10);
  return 1;
}
