/* The C guest of the side-by-side benchmark (e2e BenchmarkConfigMapHash): for each ConfigMap,
 * merge-patch the annotation bench/hash to the FNV-64a of its sorted data (key=value\n per key,
 * in hex), unless it already holds it. hashgo and e2e/testdata/crhash do the same in Go.
 *
 * The C SDK reads values by path, not an object's keys, so this walks "data" itself. ConfigMap
 * keys are [-._a-zA-Z0-9]+: they never hold an escape. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"hash-c\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"},"
         "\"permissions\":[{\"group\":\"\",\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\",\"watch\",\"patch\"]}]}";
}

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* Past the string at p ('"'). */
static const char *skip_string(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1]) p++;
  return *p ? p + 1 : p;
}

/* Past the value at p. */
static const char *skip_value(const char *p) {
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p; p++) {
      if (*p == '"') {
        p = skip_string(p) - 1;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if ((*p == '}' || *p == ']') && --depth == 0) {
        return p + 1;
      }
    }
    return p;
  }
  while (*p && *p != ',' && *p != '}' && *p != ']') p++;
  return p;
}

/* The value of key in the object at p, or NULL. */
static const char *member(const char *p, const char *key) {
  size_t n = strlen(key);
  p = skip_space(p);
  if (*p != '{') return NULL;
  p = skip_space(p + 1);
  while (*p == '"') {
    const char *k = p + 1, *end = skip_string(p);
    p = skip_space(skip_space(end) + 1); /* past ':' */
    if ((size_t)(end - 1 - k) == n && memcmp(k, key, n) == 0) return p;
    p = skip_space(skip_value(p));
    if (*p == ',') p = skip_space(p + 1);
  }
  return NULL;
}

static void put_utf8(char **o, uint32_t c) {
  if (c < 0x80) {
    *(*o)++ = (char)c;
  } else if (c < 0x800) {
    *(*o)++ = (char)(0xC0 | c >> 6), *(*o)++ = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *(*o)++ = (char)(0xE0 | c >> 12), *(*o)++ = (char)(0x80 | (c >> 6 & 0x3F)), *(*o)++ = (char)(0x80 | (c & 0x3F));
  } else {
    *(*o)++ = (char)(0xF0 | c >> 18), *(*o)++ = (char)(0x80 | (c >> 12 & 0x3F));
    *(*o)++ = (char)(0x80 | (c >> 6 & 0x3F)), *(*o)++ = (char)(0x80 | (c & 0x3F));
  }
}

static uint32_t hex4(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v = v << 4 | (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

/* Decodes the JSON string at p into a malloc'd buffer; its length in *len. */
static char *unquote(const char *p, size_t *len) {
  const char *end = skip_string(p);
  char *out = malloc((size_t)(end - p) + 1), *o = out;
  for (p++; p < end - 1; p++) {
    if (*p != '\\') {
      *o++ = *p;
      continue;
    }
    switch (*++p) {
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      uint32_t c = hex4(p + 1);
      p += 4;
      if (c >= 0xD800 && c < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
        uint32_t lo = hex4(p + 3);
        if (lo >= 0xDC00 && lo < 0xE000) c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00), p += 6;
      }
      put_utf8(&o, c);
      break;
    }
    default: *o++ = *p; /* " \ / */
    }
  }
  *len = (size_t)(o - out);
  return out;
}

typedef struct {
  const char *key;
  size_t key_len;
  char *value;
  size_t value_len;
} entry;

static int by_key(const void *a, const void *b) {
  const entry *x = a, *y = b;
  size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
  int c = memcmp(x->key, y->key, n);
  return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static uint64_t fnv(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ULL;
  return h;
}

/* The hash of the data object at p (NULL: no data). */
static uint64_t hash_data(const char *p) {
  uint64_t h = 14695981039346656037ULL;
  if (!p || *(p = skip_space(p)) != '{') return h;
  size_t n = 0, cap = 16;
  entry *es = malloc(cap * sizeof *es);
  p = skip_space(p + 1);
  while (*p == '"') {
    if (n == cap) es = realloc(es, (cap *= 2) * sizeof *es);
    const char *end = skip_string(p);
    es[n].key = p + 1, es[n].key_len = (size_t)(end - p - 2);
    p = skip_space(skip_space(end) + 1);
    es[n].value = unquote(p, &es[n].value_len);
    n++;
    p = skip_space(skip_value(p));
    if (*p == ',') p = skip_space(p + 1);
  }
  qsort(es, n, sizeof *es, by_key);
  for (size_t i = 0; i < n; i++) {
    h = fnv(h, es[i].key, es[i].key_len);
    h = fnv(h, "=", 1);
    h = fnv(h, es[i].value, es[i].value_len);
    h = fnv(h, "\n", 1);
    free(es[i].value);
  }
  free(es);
  return h;
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  wasmrec_buf ref = {0}; /* the ConfigMap's ref, without its closing brace */
  wasmrec_buf_str(&ref, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":");
  wasmrec_buf_json_string(&ref, req->namespace_);
  wasmrec_buf_str(&ref, ",\"name\":");
  wasmrec_buf_json_string(&ref, req->name);
  wasmrec_buf get = {0};
  wasmrec_buf_fmt(&get, "%s}", ref.s);
  wasmrec_response r = wasmrec_get(get.s);
  wasmrec_buf_free(&get);
  if (r.status == WASMREC_NOT_FOUND) {
    wasmrec_response_free(&r);
    wasmrec_buf_free(&ref);
    return (wasmrec_result){0};
  }
  if (r.status != WASMREC_OK) {
    wasmrec_response_free(&r);
    wasmrec_buf_free(&ref);
    return (wasmrec_result){.failed = 1, .message = "get failed"};
  }
  char sum[17];
  snprintf(sum, sizeof sum, "%" PRIx64, hash_data(member(r.data, "data")));
  char *have = NULL;
  int same = wasmrec_json_string(r.data, "metadata.annotations.bench/hash", &have) && strcmp(have, sum) == 0;
  free(have);
  wasmrec_response_free(&r);
  wasmrec_result res = {0};
  if (!same) {
    wasmrec_buf patch = {0};
    wasmrec_buf_fmt(&patch, "%s,\"type\":\"merge\",\"patch\":{\"metadata\":{\"annotations\":{\"bench/hash\":\"%s\"}}}}", ref.s, sum);
    wasmrec_response p = wasmrec_patch(patch.s);
    if (p.status != WASMREC_OK && p.status != WASMREC_NOT_FOUND) res = (wasmrec_result){.failed = 1, .message = "patch failed"};
    wasmrec_response_free(&p);
    wasmrec_buf_free(&patch);
  }
  wasmrec_buf_free(&ref);
  return res;
}
