/* A C SDK guest that logs a debug line with and without key/values, then says at info level
 * whether the SDK would make debug lines (wasmrec_log_enabled): what the C SDK does with the
 * request's flag that the host drops debug lines. */
#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"log-c\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  wasmrec_log(WASMREC_DEBUG, "plain debug line");
  wasmrec_log_kv(WASMREC_DEBUG, "debug line", "name", req->name, NULL);
  wasmrec_log(WASMREC_INFO, wasmrec_log_enabled(WASMREC_DEBUG) ? "debug lines made" : "debug lines not made");
  wasmrec_result res = {0};
  return res;
}
