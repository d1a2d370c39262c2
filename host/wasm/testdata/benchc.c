/* The C guest of the benchmarks. By request name: "noop" returns at once; "deployment-fields"
 * gets a Deployment from the host and reads spec.replicas and the template's first container
 * image from its JSON with the SDK's lookups. */
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"bench-c\",\"for\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\"},"
         "\"permissions\":[{\"group\":\"apps\",\"resources\":[\"deployments\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}";
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  if (strcmp(req->name, "deployment-fields") != 0) return (wasmrec_result){0};
  wasmrec_response r = wasmrec_get("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"namespace\":\"bench\",\"name\":\"deployment\"}");
  if (r.status != WASMREC_OK) {
    wasmrec_response_free(&r);
    return (wasmrec_result){.failed = 1, .message = "get failed"};
  }
  int64_t replicas = 0;
  char *image = NULL;
  int ok = wasmrec_json_int(r.data, "spec.replicas", &replicas) &&
           wasmrec_json_string(r.data, "spec.template.spec.containers.0.image", &image) && replicas == 3 && image[0] != 0;
  free(image);
  wasmrec_response_free(&r);
  if (!ok) return (wasmrec_result){.failed = 1, .message = "decode failed"};
  return (wasmrec_result){0};
}
