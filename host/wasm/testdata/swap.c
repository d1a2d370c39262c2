/* The hot-swap test guest, built as VERSION 1 to 5. For each Thing (follow.wasmrec.dev/v1) it
 * logs "v<N> begin <name>", reads the Thing and logs "v<N> reconciled <name> n=<spec.n>", then
 * "v<N> end <name>". With WATCH_CONFIGMAPS (3) it also watches the ConfigMaps of the Things'
 * namespaces; with WATCH_SECRETS (4, 5) it watches Secrets, asking for list and watch on them
 * only with ASK_SECRETS (5). */
#include <stdio.h>
#include <stdlib.h>

#include "wasmrec.h"

#ifndef VERSION
#define VERSION 1
#endif

const char *wasmrec_plugin_manifest(void) {
#ifdef WATCH_CONFIGMAPS /* a version that also reconciles the Things of a namespace when its ConfigMaps change */
  return "{\"name\":\"swap\",\"for\":{\"apiVersion\":\"follow.wasmrec.dev/v1\",\"kind\":\"Thing\"},"
         "\"watches\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"map\":\"namespace\"}],"
         "\"permissions\":[{\"group\":\"follow.wasmrec.dev\",\"resources\":[\"things\"],\"verbs\":[\"get\",\"list\",\"watch\"]},"
         "{\"group\":\"\",\"resources\":[\"configmaps\"],\"verbs\":[\"list\",\"watch\"]}]}";
#elif defined(WATCH_SECRETS) /* watches Secrets: asking for list and watch on them only with ASK_SECRETS */
  return "{\"name\":\"swap\",\"for\":{\"apiVersion\":\"follow.wasmrec.dev/v1\",\"kind\":\"Thing\"},"
         "\"watches\":[{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"map\":\"sameName\"}],"
         "\"permissions\":[{\"group\":\"follow.wasmrec.dev\",\"resources\":[\"things\"],\"verbs\":[\"get\",\"list\",\"watch\"]}"
#ifdef ASK_SECRETS
         ",{\"group\":\"\",\"resources\":[\"secrets\"],\"verbs\":[\"list\",\"watch\"]}"
#endif
         "]}";
#else
  return "{\"name\":\"swap\",\"for\":{\"apiVersion\":\"follow.wasmrec.dev/v1\",\"kind\":\"Thing\"},"
         "\"permissions\":[{\"group\":\"follow.wasmrec.dev\",\"resources\":[\"things\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}";
#endif
}

static char line[512];

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  snprintf(line, sizeof line, "v%d begin %s", VERSION, req->name);
  wasmrec_log(WASMREC_INFO, line);
  char q[512];
  snprintf(q, sizeof q, "{\"apiVersion\":\"follow.wasmrec.dev/v1\",\"kind\":\"Thing\",\"namespace\":\"%s\",\"name\":\"%s\"}", req->namespace_, req->name);
  wasmrec_response r = wasmrec_get(q);
  if (r.status == WASMREC_OK) {
    int64_t n = -1;
    wasmrec_json_int(r.data, "spec.n", &n);
    snprintf(line, sizeof line, "v%d reconciled %s n=%lld", VERSION, req->name, (long long)n);
    wasmrec_log(WASMREC_INFO, line);
  }
  wasmrec_response_free(&r);
  snprintf(line, sizeof line, "v%d end %s", VERSION, req->name);
  wasmrec_log(WASMREC_INFO, line);
  return (wasmrec_result){0};
}
