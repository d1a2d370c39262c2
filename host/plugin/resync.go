package plugin

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// resyncJitter is how much longer than the period each wait is, at most: plugins started
// together do not resync together.
const resyncJitter = 0.1

// resync reconciles every object of the For kind the plugin sees, every resyncPeriod, until ctx
// ends; without a resyncPeriod it returns at once. See Config.ResyncPeriod.
func (p *Plugin) resync(ctx context.Context) {
	if p.cfg.ResyncPeriod == nil {
		return
	}
	period := p.cfg.ResyncPeriod.Duration
	for {
		t := time.NewTimer(wait.Jitter(period, resyncJitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if n, ok := p.enqueueAll(ctx, nil); ok {
			p.log.V(1).Info("resync: every object enqueued", "objects", n, "period", period)
		}
	}
}
