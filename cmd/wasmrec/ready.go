package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wasmrec/wasmrec/host/apiready"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// readiness decides whether the host is ready, one reason a line when it is not: the host's
// plugins decide (plugin.Host.NotReady has the rule), given whether the host has started.
type readiness interface {
	NotReady(started bool) []string
}

// readinessOf is the host's readiness: its plugins' rule, and the API server's own readiness.
type readinessOf struct {
	host *plugin.Host
	api  *apiready.Watcher
}

func (r readinessOf) NotReady(started bool) []string {
	return append(r.host.NotReady(started), r.api.NotReady(time.Now())...)
}

// readyz serves /readyz: 200 "ok" when the host is ready, else 503 with why, one reason a line.
// started tells whether the caches have synced and every plugin of the config has loaded or been
// refused. A plugin that needs a kind the host may not list is that plugin's failure (it is
// Degraded), not the host's: see plugin.Host.NotReady.
func readyz(started func() bool, host readiness) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if why := host.NotReady(started()); len(why) > 0 {
			http.Error(w, strings.Join(why, "\n"), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
