/* A C plugin whose map function, through the C SDK, enqueues the object's own name in its
 * namespace and a cluster-scoped "all", for watches[0]; watches[1] maps by namespace. Built
 * with -DNO_MAP it has no map function. */
#include <stdlib.h>
#include <string.h>

#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"mapc\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\"},"
         "\"watches\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"map\":\"func\"},"
         "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"map\":\"namespace\"}]}";
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) { return (wasmrec_result){0}; }

#ifndef NO_MAP /* built so as mapc-nomap: a manifest that maps by func, and no map function */
void wasmrec_plugin_map(uint32_t watch, const char *object, uint32_t len) {
  if (watch != 0) __builtin_trap();
  char *ns = NULL, *name = NULL;
  if (!wasmrec_json_string(object, "metadata.namespace", &ns) || !wasmrec_json_string(object, "metadata.name", &name))
    __builtin_trap();
  wasmrec_map_add(ns, name);
  wasmrec_map_add(NULL, "all");
  wasmrec_map_add("ns", ""); /* refused: no name */
  free(ns);
  free(name);
}
#endif
