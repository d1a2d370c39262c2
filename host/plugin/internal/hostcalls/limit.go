package hostcalls

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/wasmrec/wasmrec/abi"
)

// Limit is one of a plugin's call rate limits (reads or writes). A call that has to wait for a
// token is counted, and said in the log at most every 30 s: a plugin held back by its own limit
// is otherwise only slow.
type Limit struct {
	name           string // "write" or "read"
	field          string // its field in the plugin's config
	lim            *rate.Limiter
	log            rate.Sometimes
	waits, seconds prometheus.Counter // nil without metrics
}

// NewLimit returns a limit of qps calls a second, with burst, for the calls configured in the
// plugin's config field (writes or reads). waits and seconds count the calls that waited and
// how long; nil for none.
func NewLimit(field string, qps float64, burst int, waits, seconds prometheus.Counter) *Limit {
	return &Limit{name: strings.TrimSuffix(field, "s"), field: field, lim: rate.NewLimiter(rate.Limit(qps), burst),
		log: rate.Sometimes{Interval: 30 * time.Second}, waits: waits, seconds: seconds}
}

// Wait takes a token, waiting at most until ctx's deadline.
func (l *Limit) Wait(ctx context.Context, log logr.Logger) error {
	r := l.lim.Reserve()
	d := r.Delay()
	if d == 0 {
		return nil
	}
	refuse := func() error {
		r.Cancel()
		return fail(abi.StatusTimeout, "the %s rate limit (%g/s, burst %d) would not let this call through before the reconcile's deadline", l.name, float64(l.lim.Limit()), l.lim.Burst())
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return refuse()
	}
	if l.waits != nil {
		l.waits.Inc()
		l.seconds.Add(d.Seconds())
	}
	l.log.Do(func() {
		log.Info(fmt.Sprintf("%s are waiting on the plugin's %s rate limit; raise %s.qps and %s.burst in its config if this load is expected", l.field, l.name, l.field, l.field),
			"qps", float64(l.lim.Limit()), "burst", l.lim.Burst(), "wait", d.Round(time.Millisecond))
	})
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return refuse()
	}
}
