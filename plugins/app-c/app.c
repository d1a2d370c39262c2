/* app-c: the App plugin of plugins/app, written in C against sdk/c. For each App
 * (demo.wasmrec.dev/v1) it server-side applies a ConfigMap holding spec.message and a Service on
 * spec.port, both owned by the App, and reports them in the App's status. Same reconcile, same
 * cluster state as the Go plugin: it proves the ABI does not depend on Go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"app-c\","
         "\"for\":{\"apiVersion\":\"demo.wasmrec.dev/v1\",\"kind\":\"App\",\"predicates\":[{\"type\":\"GenerationChanged\"}]},"
         "\"owns\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"},{\"apiVersion\":\"v1\",\"kind\":\"Service\"}],"
         "\"permissions\":["
         "{\"group\":\"demo.wasmrec.dev\",\"resources\":[\"apps\"],\"verbs\":[\"get\",\"list\",\"watch\"]},"
         "{\"group\":\"demo.wasmrec.dev\",\"resources\":[\"apps/status\"],\"verbs\":[\"patch\"]},"
         "{\"group\":\"\",\"resources\":[\"configmaps\",\"services\"],\"verbs\":[\"get\",\"list\",\"watch\",\"patch\"]},"
         "{\"group\":\"\",\"resources\":[\"events\"],\"verbs\":[\"create\"]}]}";
}

static char errbuf[1024];

static wasmrec_result failed(int terminal, const char *call, wasmrec_response *r) {
  snprintf(errbuf, sizeof errbuf, "%s: status %u: %s", call, r->status, r->data ? r->data : "");
  wasmrec_response_free(r);
  return (wasmrec_result){.failed = 1, .terminal = terminal, .message = errbuf};
}

/* apply server-side applies obj (the JSON of a whole object) as the kind/namespace/name given. */
static wasmrec_response apply(const char *api_version, const char *kind, const char *ns, const char *name,
                              const char *obj, const char *subresource) {
  wasmrec_buf b = {0};
  wasmrec_buf_str(&b, "{\"apiVersion\":");
  wasmrec_buf_json_string(&b, api_version);
  wasmrec_buf_str(&b, ",\"kind\":");
  wasmrec_buf_json_string(&b, kind);
  wasmrec_buf_str(&b, ",\"namespace\":");
  wasmrec_buf_json_string(&b, ns);
  wasmrec_buf_str(&b, ",\"name\":");
  wasmrec_buf_json_string(&b, name);
  if (subresource) wasmrec_buf_fmt(&b, ",\"subresource\":\"%s\"", subresource);
  wasmrec_buf_str(&b, ",\"type\":\"apply\",\"force\":true,\"patch\":");
  wasmrec_buf_str(&b, obj);
  wasmrec_buf_str(&b, "}");
  wasmrec_response r = wasmrec_patch(b.s);
  wasmrec_buf_free(&b);
  return r;
}

/* metadata writes the metadata of a child owned by the App. */
static void metadata(wasmrec_buf *b, const char *ns, const char *name, const char *uid) {
  wasmrec_buf_str(b, "\"metadata\":{\"name\":");
  wasmrec_buf_json_string(b, name);
  wasmrec_buf_str(b, ",\"namespace\":");
  wasmrec_buf_json_string(b, ns);
  wasmrec_buf_str(b, ",\"ownerReferences\":[{\"apiVersion\":\"demo.wasmrec.dev/v1\",\"kind\":\"App\",\"name\":");
  wasmrec_buf_json_string(b, name);
  wasmrec_buf_str(b, ",\"uid\":");
  wasmrec_buf_json_string(b, uid);
  wasmrec_buf_str(b, ",\"controller\":true,\"blockOwnerDeletion\":true}]}");
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  wasmrec_buf q = {0};
  wasmrec_buf_str(&q, "{\"apiVersion\":\"demo.wasmrec.dev/v1\",\"kind\":\"App\",\"namespace\":");
  wasmrec_buf_json_string(&q, req->namespace_);
  wasmrec_buf_str(&q, ",\"name\":");
  wasmrec_buf_json_string(&q, req->name);
  wasmrec_buf_str(&q, "}");
  wasmrec_response app = wasmrec_get(q.s);
  wasmrec_buf_free(&q);
  if (app.status == WASMREC_NOT_FOUND) {
    wasmrec_response_free(&app);
    return (wasmrec_result){0}; /* deleted: its children go with it */
  }
  if (app.status != WASMREC_OK) return failed(0, "get", &app);

  char *message = NULL, *uid = NULL;
  int64_t port = 80, gen = 0, observed = -1;
  if (!wasmrec_json_string(app.data, "spec.message", &message)) message = strdup("");
  if (!wasmrec_json_string(app.data, "metadata.uid", &uid)) uid = strdup("");
  wasmrec_json_int(app.data, "spec.port", &port);
  wasmrec_json_int(app.data, "metadata.generation", &gen);
  wasmrec_json_int(app.data, "status.observedGeneration", &observed);
  wasmrec_response_free(&app);

  wasmrec_result result = {0};
  if (port < 1 || port > 65535) {
    wasmrec_buf e = {0};
    wasmrec_buf_fmt(&e, "{\"type\":\"Warning\",\"reason\":\"InvalidPort\",\"message\":\"spec.port %lld is not a port\"}", (long long)port);
    wasmrec_response r = wasmrec_event(e.s);
    wasmrec_response_free(&r);
    wasmrec_buf_free(&e);
    snprintf(errbuf, sizeof errbuf, "spec.port %lld is outside 1-65535", (long long)port);
    result = (wasmrec_result){.failed = 1, .terminal = 1, .message = errbuf};
    goto out;
  }

  wasmrec_buf cm = {0};
  wasmrec_buf_str(&cm, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",");
  metadata(&cm, req->namespace_, req->name, uid);
  wasmrec_buf_str(&cm, ",\"data\":{\"message\":");
  wasmrec_buf_json_string(&cm, message);
  wasmrec_buf_str(&cm, "}}");
  wasmrec_response r = apply("v1", "ConfigMap", req->namespace_, req->name, cm.s, NULL);
  wasmrec_buf_free(&cm);
  if (r.status != WASMREC_OK) { result = failed(0, "apply configmap", &r); goto out; }
  wasmrec_response_free(&r);

  wasmrec_buf svc = {0};
  wasmrec_buf_str(&svc, "{\"apiVersion\":\"v1\",\"kind\":\"Service\",");
  metadata(&svc, req->namespace_, req->name, uid);
  wasmrec_buf_str(&svc, ",\"spec\":{\"selector\":{\"app\":");
  wasmrec_buf_json_string(&svc, req->name);
  wasmrec_buf_fmt(&svc, "},\"ports\":[{\"name\":\"http\",\"port\":%lld,\"protocol\":\"TCP\"}]}}", (long long)port);
  r = apply("v1", "Service", req->namespace_, req->name, svc.s, NULL);
  wasmrec_buf_free(&svc);
  if (r.status != WASMREC_OK) { result = failed(0, "apply service", &r); goto out; }
  wasmrec_response_free(&r);

  if (observed != gen) {
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    wasmrec_buf st = {0};
    wasmrec_buf_str(&st, "{\"apiVersion\":\"demo.wasmrec.dev/v1\",\"kind\":\"App\",\"metadata\":{\"name\":");
    wasmrec_buf_json_string(&st, req->name);
    wasmrec_buf_str(&st, ",\"namespace\":");
    wasmrec_buf_json_string(&st, req->namespace_);
    wasmrec_buf_fmt(&st, "},\"status\":{\"observedGeneration\":%lld,\"configMap\":", (long long)gen);
    wasmrec_buf_json_string(&st, req->name);
    wasmrec_buf_str(&st, ",\"service\":");
    wasmrec_buf_json_string(&st, req->name);
    wasmrec_buf_str(&st, ",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"ChildrenApplied\",\"message\":\"configmap and service ");
    wasmrec_buf_str(&st, req->name); /* names are DNS labels: nothing to escape */
    wasmrec_buf_fmt(&st, " are applied\",\"observedGeneration\":%lld,\"lastTransitionTime\":\"%s\"}]}}", (long long)gen, now);
    r = apply("demo.wasmrec.dev/v1", "App", req->namespace_, req->name, st.s, "status");
    wasmrec_buf_free(&st);
    if (r.status != WASMREC_OK) { result = failed(0, "apply status", &r); goto out; }
    wasmrec_response_free(&r);

    char app[512], generation[24], port_s[24];
    snprintf(app, sizeof app, "%s/%s", req->namespace_, req->name);
    snprintf(generation, sizeof generation, "%lld", (long long)gen);
    snprintf(port_s, sizeof port_s, "%lld", (long long)port);
    wasmrec_log_kv(WASMREC_INFO, "reconciled", "app", app, "generation", generation, "port", port_s, NULL);
  }

out:
  free(message);
  free(uid);
  return result;
}
