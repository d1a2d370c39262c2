/* wasmrec C SDK: the ABI v1 exports, host-call wrappers and a little JSON. */
#include "wasmrec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exports the host calls; compiled natively (a unit test) they are plain functions. The
 * imports are declared in wasmrec.h. */
#if defined(__wasm__)
#define EXPORT(name) __attribute__((export_name(name)))
#else
#define EXPORT(name)
#endif

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

/* maps_by_func reports whether manifest m has a watch whose "map" is "func". */
static int maps_by_func(const char *m) {
  for (const char *p = strstr(m, "\"map\""); p; p = strstr(p + 1, "\"map\"")) {
    const char *v = p + 5;
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    if (*v++ != ':') continue;
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    if (strncmp(v, "\"func\"", 6) == 0) return 1;
  }
  return 0;
}

EXPORT("wasmrec_manifest") uint64_t wasmrec_manifest(void) {
  const char *m = wasmrec_plugin_manifest();
  if (!wasmrec_plugin_map && maps_by_func(m)) {
    /* Refused at load, with this line: else every event of the watch would trap. */
    fputs("panic: wasmrec: the manifest maps a watch by \"func\", but the plugin defines no "
          "wasmrec_plugin_map: define it (see wasmrec.h)\n",
          stderr);
    __builtin_trap();
  }
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

/* Whether the host keeps none of this reconcile's debug lines (the envelope's flags, bit 0):
 * then the SDK does not make them. */
static int drops_debug;

int wasmrec_log_enabled(int level) { return !(level <= WASMREC_DEBUG && drops_debug); }

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
  drops_debug = get32(env + 12) & 1;
  wasmrec_result res = wasmrec_plugin_reconcile(&req);
  drops_debug = 0; /* a map function's lines go to the host, which decides */
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

/* map_buf holds the requests wasmrec_plugin_map adds, as request envelopes, until the host has
 * copied them. */
static uint8_t *map_buf;
static size_t map_len, map_cap;

int wasmrec_map_add(const char *namespace_, const char *name) {
  size_t ns_len = namespace_ ? strlen(namespace_) : 0, name_len = name ? strlen(name) : 0;
  if (name_len == 0) return -1;
  size_t need = map_len + 16 + ns_len + name_len;
  if (need > map_cap) {
    size_t cap = map_cap ? map_cap : 1024;
    while (cap < need) cap *= 2;
    uint8_t *b = realloc(map_buf, cap);
    if (!b) return -1;
    map_buf = b, map_cap = cap;
  }
  uint8_t *p = map_buf + map_len;
  put32(p, (uint32_t)ns_len);
  put32(p + 4, (uint32_t)name_len);
  put32(p + 8, 0);
  put32(p + 12, 0);
  if (ns_len) memcpy(p + 16, namespace_, ns_len);
  memcpy(p + 16 + ns_len, name, name_len);
  map_len = need;
  return 0;
}

EXPORT("wasmrec_map") uint64_t wasmrec_map(uint32_t watch, uint32_t n) {
  if (!wasmrec_plugin_map) __builtin_trap(); /* the manifest maps a watch, the plugin has no map */
  char *object = read_pending(n);
  map_len = 0;
  wasmrec_plugin_map(watch, object, n);
  free(object);
  return map_len ? pack(map_buf, (uint32_t)map_len) : 0;
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

void wasmrec_log(int level, const char *msg) {
  if (wasmrec_log_enabled(level)) wasmrec_host_log(level, msg, (uint32_t)strlen(msg));
}

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

/* --- structured logs --- */

void wasmrec_log_kvv(int level, const char *msg, va_list ap) {
  if (!wasmrec_log_enabled(level)) return;
  wasmrec_buf b = {0};
  wasmrec_buf_str(&b, msg);
  const char *key = va_arg(ap, const char *);
  if (key) {
    b.len++; /* the NUL that wasmrec_buf_str left after msg */
    wasmrec_buf_str(&b, "[");
    for (int first = 1; key; key = va_arg(ap, const char *), first = 0) {
      const char *value = va_arg(ap, const char *);
      if (!first) wasmrec_buf_str(&b, ",");
      wasmrec_buf_json_string(&b, key);
      wasmrec_buf_str(&b, ",");
      if (value) wasmrec_buf_json_string(&b, value);
      else wasmrec_buf_str(&b, "null");
    }
    wasmrec_buf_str(&b, "]");
  }
  wasmrec_host_log(level, b.s, (uint32_t)b.len);
  wasmrec_buf_free(&b);
}

void wasmrec_log_kv(int level, const char *msg, ...) {
  va_list ap;
  va_start(ap, msg);
  wasmrec_log_kvv(level, msg, ap);
  va_end(ap);
}

/* --- reading JSON: just enough to find a value by path, and to walk a container --- */

/* Containers nested deeper than this below the value being skipped are refused (the recursion
 * of skip_value stays within a small stack). */
#define MAX_DEPTH 512

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

static int digit(char c) { return c >= '0' && c <= '9'; }

/* skip_scalar returns the end of the true, false, null or number at p, or NULL. */
static const char *skip_scalar(const char *p) {
  static const char *const words[] = {"true", "false", "null"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    size_t n = strlen(words[i]);
    if (strncmp(p, words[i], n) == 0) return p + n;
  }
  if (*p == '-') p++;
  if (!digit(*p)) return NULL;
  while (digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
  return p;
}

static const char *skip_value_at(const char *p, int depth) {
  p = ws(p);
  if (*p == '"') return skip_string(p);
  if (*p != '{' && *p != '[') return skip_scalar(p);
  if (depth >= MAX_DEPTH) return NULL;
  char close = *p == '{' ? '}' : ']';
  p = ws(p + 1);
  if (*p == close) return p + 1;
  for (;;) {
    if (close == '}') {
      if (*p != '"' || !(p = skip_string(p))) return NULL;
      p = ws(p);
      if (*p++ != ':') return NULL;
    }
    if (!(p = skip_value_at(p, depth + 1))) return NULL;
    p = ws(p);
    if (*p == ',') { p = ws(p + 1); continue; }
    return *p == close ? p + 1 : NULL;
  }
}

/* skip_value returns the end of the value at p (after leading space), or NULL if it is
 * malformed or truncated. */
static const char *skip_value(const char *p) { return skip_value_at(p, 0); }

/* hex4 reads 4 hex digits at p; it stops at the first other character (the NUL included). */
static int hex4(const char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    if (c >= '0' && c <= '9') v = v << 4 | (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v = v << 4 | (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v = v << 4 | (uint32_t)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

/* utf8 writes code point cp (not a surrogate, at most 0x10ffff) to w and returns its length. */
static int utf8(uint32_t cp, char *w) {
  if (cp < 0x80) { w[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    w[0] = (char)(0xc0 | cp >> 6);
    w[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    w[0] = (char)(0xe0 | cp >> 12);
    w[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    w[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  w[0] = (char)(0xf0 | cp >> 18);
  w[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  w[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  w[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* unescape decodes one character of a JSON string at p (not its closing quote): a byte as it
 * is, or an escape as UTF-8. It writes n (1 to 4) bytes to w and returns what follows, or NULL
 * for the end of the text, a bad escape, a lone surrogate or \u0000. */
static const char *unescape(const char *p, char w[4], int *n) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  *n = 1;
  if (!*p) return NULL;
  if (*p != '\\') { w[0] = *p; return p + 1; }
  p++;
  const char *e = *p ? strchr(from, *p) : NULL;
  if (e) { w[0] = to[e - from]; return p + 1; }
  uint32_t cp, lo;
  if (*p != 'u' || !hex4(p + 1, &cp) || cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff)) return NULL;
  p += 5;
  if (cp >= 0xd800 && cp <= 0xdbff) {
    if (p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff) return NULL;
    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    p += 6;
  }
  *n = utf8(cp, w);
  return p;
}

/* decode_string decodes the string whose opening quote is at p into dst, which has room for
 * end - p bytes (decoding never lengthens, and the quotes make room for the NUL), end being
 * skip_string(p). It returns 0 for a bad escape. */
static int decode_string(const char *p, const char *end, char *dst) {
  for (p++; p < end - 1;) {
    int n;
    if (!(p = unescape(p, dst, &n))) return 0;
    dst += n;
  }
  *dst = 0;
  return p == end - 1;
}

/* match_key compares the key whose opening quote is at p with seg (n bytes), escapes
 * resolved. It returns the character after the closing quote, or NULL for a bad key. */
static const char *match_key(const char *p, const char *seg, size_t n, int *match) {
  size_t i = 0;
  *match = 1;
  for (p++; *p != '"';) {
    char c[4];
    int k;
    if (!(p = unescape(p, c, &k))) return NULL;
    if (*match && i + (size_t)k <= n && memcmp(seg + i, c, (size_t)k) == 0) i += (size_t)k;
    else *match = 0;
  }
  *match = *match && i == n;
  return p + 1;
}

/* find returns where the value at path starts, or NULL. A segment of digits indexes an array
 * ("spec.containers.0.image"). */
static const char *find(const char *json, const char *path) {
  const char *p = ws(json);
  if (!path) path = "";
  while (*path) {
    const char *dot = strchr(path, '.');
    size_t klen = dot ? (size_t)(dot - path) : strlen(path);
    if (*p == '[') {
      size_t index = 0, i;
      for (i = 0; i < klen && digit(path[i]); i++) index = index * 10 + (size_t)(path[i] - '0');
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
      int match;
      if (!(p = match_key(p, path, klen, &match))) return NULL;
      p = ws(p);
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
  char *s = malloc((size_t)(end - p));
  if (!s) __builtin_trap();
  if (!decode_string(p, end, s)) {
    free(s);
    return 0;
  }
  *out = s;
  return 1;
}

int wasmrec_json_int(const char *json, const char *path, int64_t *out) {
  const char *p = find(json, path);
  if (!p || !(*p == '-' || digit(*p))) return 0;
  *out = strtoll(p, NULL, 10);
  return 1;
}

/* --- walking an object or an array --- */

int wasmrec_json_iter_init(wasmrec_json_iter *it, const char *json, const char *path) {
  *it = (wasmrec_json_iter){0};
  const char *p = find(json, path);
  if (!p || (*p != '{' && *p != '[')) return 0;
  if (!skip_value(p)) { /* malformed or truncated: nothing is returned, not even a first part */
    it->error = 1;
    return 0;
  }
  it->object = *p == '{';
  it->p = ws(p + 1);
  return 1;
}

void wasmrec_json_iter_free(wasmrec_json_iter *it) {
  free(it->key);
  it->key = NULL;
  it->key_cap = 0;
  it->p = NULL;
}

/* iter_stop ends the walk, an error if bad; next returns its 0. */
static int iter_stop(wasmrec_json_iter *it, int bad) {
  wasmrec_json_iter_free(it);
  it->error = bad;
  return 0;
}

int wasmrec_json_next(wasmrec_json_iter *it, const char **key, const char **value, size_t *len) {
  const char *p = it->p;
  if (!p) return 0;
  if (*p == (it->object ? '}' : ']')) return iter_stop(it, 0);
  *key = NULL;
  if (it->object) {
    const char *end = *p == '"' ? skip_string(p) : NULL;
    if (!end) return iter_stop(it, 1);
    if (it->key_cap < (size_t)(end - p)) {
      free(it->key);
      it->key_cap = (size_t)(end - p) < 64 ? 64 : (size_t)(end - p);
      if (!(it->key = malloc(it->key_cap))) __builtin_trap();
    }
    if (!decode_string(p, end, it->key)) return iter_stop(it, 1);
    p = ws(end);
    if (*p++ != ':') return iter_stop(it, 1);
    *key = it->key;
  }
  p = ws(p);
  const char *end = skip_value(p);
  if (!end) return iter_stop(it, 1);
  *value = p;
  *len = (size_t)(end - p);
  p = ws(end);
  if (*p == ',') p = ws(p + 1);
  it->p = p;
  return 1;
}
