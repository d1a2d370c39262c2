/* Native tests of the C SDK's JSON helpers and log encoding (the parts that need no host but a
 * log stub): `make test` builds this with the host's clang and runs it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

/* The host imports: log keeps what it was given, the others are never reached. */
int32_t wasmrec_host_read(void *ptr, uint32_t len) { abort(); }
static int logged_level = -1;
static char *logged;
static uint32_t logged_len;
void wasmrec_host_log(int32_t level, const void *ptr, uint32_t len) {
  free(logged);
  logged = malloc(len ? len : 1);
  memcpy(logged, ptr, len);
  logged_len = len;
  logged_level = level;
}
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

/* want_iter walks path in json and compares, as "key=value;" (value the JSON text as it is;
 * no "key=" for an array), what it returned, init's result and the error flag. */
static void want_iter(const char *json, const char *path, int init_want, const char *want, int error_want) {
  wasmrec_json_iter it;
  wasmrec_buf got = {0};
  const char *key, *value;
  size_t len;
  wasmrec_buf_str(&got, "");
  int init = wasmrec_json_iter_init(&it, json, path);
  while (wasmrec_json_next(&it, &key, &value, &len)) {
    if (key) wasmrec_buf_fmt(&got, "%s=", key);
    wasmrec_buf_fmt(&got, "%.*s;", (int)len, value);
  }
  int again = wasmrec_json_next(&it, &key, &value, &len); /* still done */
  checks++;
  if (init != init_want || strcmp(got.s, want) != 0 || it.error != error_want || again) {
    failures++;
    fprintf(stderr, "FAIL iterating %s at %s: init %d, %s, error %d, again %d; want init %d, %s, error %d\n", json,
            path ? path : "NULL", init, got.s, it.error, again, init_want, want, error_want);
  }
  wasmrec_buf_free(&got);
}

/* want_log compares the bytes of the last log call with want (n bytes, NULs included). */
static void want_log(const char *what, int level, const char *want, size_t n) {
  checks++;
  if (logged_level != level || logged_len != n || memcmp(logged, want, n) != 0) {
    failures++;
    fprintf(stderr, "FAIL %s: logged level %d, %u bytes: ", what, logged_level, logged_len);
    for (uint32_t i = 0; i < logged_len; i++) fputc(logged[i] ? logged[i] : '0', stderr);
    fprintf(stderr, "; want level %d, %zu bytes\n", level, n);
  }
}
#define WANT_LOG(what, level, lit) want_log(what, level, lit, sizeof lit - 1)

static void check(const char *what, int ok) {
  checks++;
  if (!ok) {
    failures++;
    fprintf(stderr, "FAIL %s\n", what);
  }
}

/* strings: every escape, surrogate pairs and what must fail. */
static void test_strings(void) {
  want_string("{\"s\":\"\\\"\"}", "s", "\"");
  want_string("{\"s\":\"\\\\\"}", "s", "\\");
  want_string("{\"s\":\"\\/\"}", "s", "/");
  want_string("{\"s\":\"\\b\"}", "s", "\b");
  want_string("{\"s\":\"\\f\"}", "s", "\f");
  want_string("{\"s\":\"\\n\"}", "s", "\n");
  want_string("{\"s\":\"\\r\"}", "s", "\r");
  want_string("{\"s\":\"\\t\"}", "s", "\t");
  want_string("{\"s\":\"a\\b\\f\\/z\"}", "s", "a\b\f/z");
  want_string("{\"s\":\"\\u0041\\u007f\"}", "s", "A\x7f");
  want_string("{\"s\":\"\\u0001\\u001f\"}", "s", "\x01\x1f");
  want_string("{\"s\":\"\\u00e9\\u00E9\\u07ff\"}", "s", "\xc3\xa9\xc3\xa9\xdf\xbf");
  want_string("{\"s\":\"\\u0800\\u20AC\\uffff\"}", "s", "\xe0\xa0\x80\xe2\x82\xac\xef\xbf\xbf");
  want_string("{\"s\":\"\\u003cb\\u003e\\u0026\"}", "s", "<b>&"); /* as Go's encoder writes them */
  want_string("{\"s\":\"\\ud83d\\ude00\"}", "s", "\xf0\x9f\x98\x80");  /* U+1F600 */
  want_string("{\"s\":\"x\\uD83D\\uDE00y\"}", "s", "x\xf0\x9f\x98\x80y");
  want_string("{\"s\":\"\\ud800\\udc00\"}", "s", "\xf0\x90\x80\x80");  /* U+10000 */
  want_string("{\"s\":\"\\udbff\\udfff\"}", "s", "\xf4\x8f\xbf\xbf");  /* U+10FFFF */
  want_string("{\"s\":\"\xf0\x9f\x98\x80\"}", "s", "\xf0\x9f\x98\x80"); /* raw UTF-8 as it is */
  want_string("{\"s\":\"\"}", "s", "");
  want_string("\"top\"", "", "top");
  want_string("\"top\"", NULL, "top");
  /* lone and malformed surrogates */
  want_string("{\"s\":\"\\ud83d\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83dx\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\n\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\u0041\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\ud83d\"}", "s", NULL);
  want_string("{\"s\":\"\\ude00\"}", "s", NULL);
  want_string("{\"s\":\"\\ude00\\ud83d\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\ude0\"}", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\\"}", "s", NULL);
  /* bad escapes, \u0000 */
  want_string("{\"s\":\"\\x\"}", "s", NULL);
  want_string("{\"s\":\"\\a\"}", "s", NULL);
  want_string("{\"s\":\"\\U0041\"}", "s", NULL);
  want_string("{\"s\":\"\\u12\"}", "s", NULL);
  want_string("{\"s\":\"\\u12g4\"}", "s", NULL);
  want_string("{\"s\":\"\\u-123\"}", "s", NULL);
  want_string("{\"s\":\"\\u 123\"}", "s", NULL);
  want_string("{\"s\":\"a\\u0000b\"}", "s", NULL);
  /* truncated */
  want_string("{\"s\":\"ab\\", "s", NULL);
  want_string("{\"s\":\"\\u00", "s", NULL);
  want_string("{\"s\":\"\\ud83d\\ude0", "s", NULL);
  want_string("{\"s\":\"\\ud83d", "s", NULL);
  want_string("{\"s\":", "s", NULL);
  want_string("{\"s\"", "s", NULL);
  /* keys are matched with their escapes resolved */
  want_int("{\"caf\\u00e9\":1}", "caf\xc3\xa9", 1, 1);
  want_int("{\"a\\\"b\":2,\"c\":3}", "a\"b", 1, 2);
  want_int("{\"a\\\"b\":2,\"c\":3}", "c", 1, 3);
  want_int("{\"ab\":1}", "a", 0, 0);
  want_int("{\"a\":1}", "ab", 0, 0);
  want_int("{\"\\ud83d\":1,\"c\":3}", "c", 0, 0); /* a key that does not decode */
  want_int("{\"a\":{\"b\":1}}", NULL, 0, 0);
}

static void test_iter(void) {
  const char *pod = "{\"metadata\":{\"labels\":{\"app\":\"web\",\"tier\":\"db\"},\"annotations\":{}},"
                    "\"spec\":{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":80},{\"containerPort\":81}]},"
                    "{\"name\":\"b\",\"ports\":[]}]},"
                    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"Synced\",\"status\":\"False\"}]}}";
  want_iter(pod, "metadata.labels", 1, "app=\"web\";tier=\"db\";", 0);
  want_iter(pod, "metadata.annotations", 1, "", 0);
  want_iter(pod, "metadata", 1, "labels={\"app\":\"web\",\"tier\":\"db\"};annotations={};", 0);
  want_iter(pod, "spec.containers.0.ports", 1, "{\"containerPort\":80};{\"containerPort\":81};", 0);
  want_iter(pod, "spec.containers.1.ports", 1, "", 0);
  want_iter(pod, "metadata.missing", 0, "", 0);
  want_iter(pod, "spec.containers.0.name", 0, "", 0); /* a string */
  want_iter(pod, "spec.containers.5", 0, "", 0);
  want_iter("[1,-2.5e3,true,false,null,\"s\",[],{}]", "", 1, "1;-2.5e3;true;false;null;\"s\";[];{};", 0);
  want_iter("[1,2]", NULL, 1, "1;2;", 0);
  want_iter(" { \"a\" : 1 ,\n\t\"b\" : [ 1 , 2 ] } ", "", 1, "a=1;b=[ 1 , 2 ];", 0);
  want_iter("{ }", "", 1, "", 0);
  want_iter("[ ]", "", 1, "", 0);
  want_iter("{\"a\\u00e9\\n\\ud83d\\ude00\":1,\"\":2}", "", 1, "a\xc3\xa9\n\xf0\x9f\x98\x80=1;=2;", 0);
  want_iter("{\"k\":\"v\\\"}\"}", "", 1, "k=\"v\\\"}\";", 0); /* a quote and brace in a string */
  /* malformed or truncated: init refuses the container */
  const char *bad[] = {"{\"a\":1,\"b\":", "{\"a\":1,", "[1,2", "[1,]", "{\"a\":1,}", "{\"a\"}", "{\"a\":}",
                       "{,}", "[,]", "[1 2]", "{\"a\":1 \"b\":2}", "{1:2}", "[tru]", "[nul]", "[-]", "[x]",
                       "[\"a]", "{\"a\":[1,{\"b\":]}", "[1}", "{\"a\":1]", "[", "{"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) want_iter(bad[i], "", 0, "", 1);
  /* a key that does not decode stops the walk there, as an error */
  want_iter("{\"a\":1,\"b\\u0000\":2,\"c\":3}", "", 1, "a=1;", 1);
  want_iter("{\"a\":1,\"\\x\":2}", "", 1, "a=1;", 1);

  /* nesting: 512 levels below the container are refused, fewer are walked */
  wasmrec_buf deep = {0};
  for (int i = 0; i < 600; i++) wasmrec_buf_str(&deep, "[");
  for (int i = 0; i < 600; i++) wasmrec_buf_str(&deep, "]");
  want_iter(deep.s, "", 0, "", 1);
  deep.len = 0;
  for (int i = 0; i < 100; i++) wasmrec_buf_str(&deep, "[");
  for (int i = 0; i < 100; i++) wasmrec_buf_str(&deep, "]");
  want_iter(deep.s + 98, "", 1, "[];", 0);
  wasmrec_buf inner = {0};
  for (int i = 0; i < 99; i++) wasmrec_buf_str(&inner, "[");
  for (int i = 0; i < 99; i++) wasmrec_buf_str(&inner, "]");
  wasmrec_buf_str(&inner, ";");
  want_iter(deep.s, "", 1, inner.s, 0);
  wasmrec_buf_free(&inner);
  wasmrec_buf_free(&deep);

  /* the lookups and a nested walk take a value in place */
  wasmrec_json_iter it, ports;
  const char *key, *value, *pv;
  size_t len, plen;
  wasmrec_buf got = {0};
  wasmrec_buf_str(&got, "");
  wasmrec_json_iter_init(&it, pod, "status.conditions");
  while (wasmrec_json_next(&it, &key, &value, &len)) {
    char *type = NULL, *status = NULL;
    if (wasmrec_json_string(value, "type", &type) && wasmrec_json_string(value, "status", &status))
      wasmrec_buf_fmt(&got, "%s:%s;", type, status);
    free(type);
    free(status);
  }
  check("conditions read in place", strcmp(got.s, "Ready:True;Synced:False;") == 0 && !it.error);
  got.len = 0;
  wasmrec_buf_str(&got, "");
  wasmrec_json_iter_init(&it, pod, "spec.containers");
  while (wasmrec_json_next(&it, &key, &value, &len)) {
    char *name = NULL;
    wasmrec_json_string(value, "name", &name);
    wasmrec_buf_fmt(&got, "%s[", name);
    free(name);
    wasmrec_json_iter_init(&ports, value, "ports");
    while (wasmrec_json_next(&ports, &key, &pv, &plen)) {
      int64_t port = 0;
      wasmrec_json_int(pv, "containerPort", &port);
      wasmrec_buf_fmt(&got, "%lld,", (long long)port);
    }
    wasmrec_buf_str(&got, "]");
  }
  check("nested walk", strcmp(got.s, "a[80,81,]b[]") == 0);
  wasmrec_buf_free(&got);

  /* stopping early: iter_free releases the key (LeakSanitizer would tell), twice is harmless */
  wasmrec_json_iter_init(&it, pod, "metadata.labels");
  check("first label", wasmrec_json_next(&it, &key, &value, &len) && strcmp(key, "app") == 0 && len == 5 &&
                           memcmp(value, "\"web\"", 5) == 0);
  wasmrec_json_iter_free(&it);
  wasmrec_json_iter_free(&it);
  check("next after free", !wasmrec_json_next(&it, &key, &value, &len) && !it.error);

  /* every prefix of a document is truncated: refused, each in a buffer of its own size so that
   * AddressSanitizer sees any read past the end; the lookups must not read past it either */
  size_t n = strlen(pod);
  int refused = 1;
  for (size_t i = 0; i < n; i++) {
    char *p = malloc(i + 1);
    memcpy(p, pod, i);
    p[i] = 0;
    char *s = NULL;
    int64_t v;
    refused &= !wasmrec_json_iter_init(&it, p, "") && (i == 0 || it.error);
    while (wasmrec_json_next(&it, &key, &value, &len)) refused = 0;
    wasmrec_json_iter_init(&it, p, "status.conditions");
    while (wasmrec_json_next(&it, &key, &value, &len)) {}
    if (wasmrec_json_string(p, "status.conditions.1.type", &s)) free(s);
    wasmrec_json_int(p, "spec.containers.0.ports.1.containerPort", &v);
    free(p);
  }
  check("every prefix refused", refused);
}

static void test_log(void) {
  wasmrec_log(WASMREC_WARN, "plain");
  WANT_LOG("wasmrec_log", 2, "plain");
  wasmrec_log_kv(WASMREC_INFO, "no pairs", NULL);
  WANT_LOG("kv without pairs", 1, "no pairs");
  wasmrec_log_kv(WASMREC_INFO, "scaled", "deployment", "web", "replicas", "3", NULL);
  WANT_LOG("kv", 1, "scaled\0[\"deployment\",\"web\",\"replicas\",\"3\"]");
  wasmrec_log_kv(WASMREC_ERROR, "", "k", "v", NULL);
  WANT_LOG("kv with an empty message", 3, "\0[\"k\",\"v\"]");
  wasmrec_log_kv(WASMREC_DEBUG, "m", "k\"\\", "a\\b\n\t\r\b\f\x01\x1f\xc3\xa9/", "null", NULL, "", "", NULL);
  WANT_LOG("kv escaping", 0,
           "m\0[\"k\\\"\\\\\",\"a\\\\b\\n\\t\\r\\u0008\\u000c\\u0001\\u001f\xc3\xa9/\",\"null\",null,\"\",\"\"]");

  /* the array reads back with the SDK's own walk */
  wasmrec_log_kv(WASMREC_INFO, "x", "a\"b", "\x01\xf0\x9f\x98\x80", "c", "d", NULL);
  char *kv = malloc(logged_len + 1);
  memcpy(kv, logged, logged_len);
  kv[logged_len] = 0;
  wasmrec_json_iter it;
  const char *key, *value;
  size_t len;
  wasmrec_buf got = {0};
  wasmrec_buf_str(&got, "");
  check("msg then NUL", strcmp(kv, "x") == 0);
  wasmrec_json_iter_init(&it, kv + 2, "");
  while (wasmrec_json_next(&it, &key, &value, &len)) {
    char *s = NULL;
    if (wasmrec_json_string(value, "", &s)) wasmrec_buf_fmt(&got, "%s|", s);
    free(s);
  }
  check("kv read back", strcmp(got.s, "a\"b|\x01\xf0\x9f\x98\x80|c|d|") == 0 && !it.error);
  wasmrec_buf_free(&got);
  free(kv);
}

static void log_kvv(int level, const char *msg, ...) {
  va_list ap;
  va_start(ap, msg);
  wasmrec_log_kvv(level, msg, ap);
  va_end(ap);
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

  test_strings();
  test_iter();
  test_log();
  log_kvv(WASMREC_WARN, "via kvv", "k", "v", NULL);
  WANT_LOG("wasmrec_log_kvv", 2, "via kvv\0[\"k\",\"v\"]");
  free(logged);

  want_built("plain", "\"plain\"");
  want_built("q\"b\\\n\t\x01", "\"q\\\"b\\\\\\n\\t\\u0001\"");

  if (failures) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("ok  sdk/c: %d checks\n", checks);
  return 0;
}
