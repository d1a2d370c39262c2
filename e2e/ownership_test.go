package e2e

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/ownership"
)

// activity counts the runs of each unit going now, across every table of a test, and records
// any unit run twice at once.
type activity struct {
	mu      sync.Mutex
	running map[string]int
	twice   []string
}

func (a *activity) run(ctx context.Context, who string, held []string) error {
	a.mu.Lock()
	for _, u := range held {
		a.running[u]++
		if a.running[u] > 1 {
			a.twice = append(a.twice, fmt.Sprintf("%s: run by %s while another replica ran it", u, who))
		}
	}
	a.mu.Unlock()
	<-ctx.Done()
	a.mu.Lock()
	for _, u := range held {
		a.running[u]--
	}
	a.mu.Unlock()
	return nil
}

// table is one replica of an in-process group.
type table struct {
	t      *ownership.Table
	claim  *ownership.Claim
	stop   context.CancelFunc
	done   chan struct{}
	ranOut chan error
}

func startTable(t *testing.T, restCfg *rest.Config, ns, id string, units []string, a *activity) *table {
	t.Helper()
	tb, err := ownership.New(kubernetes.NewForConfigOrDie(restCfg), ownership.Options{Namespace: ns, Group: "own", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond, Logger: testr.New(t).WithName(id)})
	must(t, err)
	claim, err := tb.Claim(units...)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &table{t: tb, claim: claim, stop: cancel, done: make(chan struct{}), ranOut: make(chan error, 1)}
	go func() { defer close(r.done); _ = tb.Start(ctx) }()
	go func() {
		r.ranOut <- claim.Run(ctx, func(ctx context.Context, held []string) error { return a.run(ctx, id, held) })
	}()
	t.Cleanup(func() { cancel(); <-r.done; <-r.ranOut })
	return r
}

func (r *table) held() []string {
	s, _ := r.claim.State()
	return s.Held
}

// waitHeld waits until the tables hold every unit once, each between lo and hi of them, and
// the shards of s spread: none holds more than its share of them.
func waitHeld(t *testing.T, what string, units []string, lo, hi int, tables ...*table) {
	t.Helper()
	shards := 0
	for _, u := range units {
		if strings.HasPrefix(u, "s/") {
			shards++
		}
	}
	eventually(t, 20*time.Second, what, func() error {
		count := map[string]int{}
		var desc []string
		for _, r := range tables {
			h := r.held()
			desc = append(desc, fmt.Sprint(h))
			if len(h) < lo || len(h) > hi {
				return fmt.Errorf("holding %v", desc)
			}
			if n := len(slices.DeleteFunc(slices.Clone(h), func(u string) bool { return !strings.HasPrefix(u, "s/") })); n > (shards+len(tables)-1)/len(tables) {
				return fmt.Errorf("the shards of s are not spread: %v", desc)
			}
			for _, u := range h {
				count[u]++
			}
		}
		for _, u := range units {
			if count[u] != 1 {
				return fmt.Errorf("%s held %d times: %v", u, count[u], desc)
			}
		}
		return nil
	})
}

// Tables in one process, each its own replica, on short leases: they split 10 units 4, 3 and 3
// (not 4, 4 and 2, which the share rounded up alone allows), and the 3 shards of s one each;
// one stopping hands its units to the others at once; one cut off from the API server stops its
// runs at its renew deadline, before the others take its units when its Leases expire; a
// newcomer is given a share, and a third one a share and one of the shards. No unit runs twice
// at once throughout.
func TestOwnershipTables(t *testing.T) {
	ns := namespace(t)
	units := []string{"p", "q", "r", "s/0", "s/1", "s/2", "t", "u", "v", "w"}
	a := &activity{running: map[string]int{}}
	u, err := url.Parse(cfg.Host)
	must(t, err)
	proxy := newAPIProxy(t, u.Host)
	cutCfg := rest.CopyConfig(cfg)
	cutCfg.Host = "http://" + proxy.addr
	if u.Scheme == "https" {
		cutCfg.Host = "https://" + proxy.addr
	}

	x := startTable(t, cfg, ns, "x", units, a)
	y := startTable(t, cfg, ns, "y", units, a)
	z := startTable(t, cutCfg, ns, "z", units, a)
	waitHeld(t, "10 units split 4, 3 and 3 among 3 tables", units, 3, 4, x, y, z)

	x.stop()
	<-x.done
	began := time.Now()
	waitHeld(t, "x's units with y and z", units, 5, 5, y, z)
	t.Logf("a stopped table's units were taken in %s", time.Since(began).Round(time.Millisecond))

	zHeld := z.held()
	proxy.cut()
	began = time.Now()
	eventually(t, 10*time.Second, "z letting go of its units at its renew deadline", func() error {
		if h := z.held(); len(h) > 0 {
			return fmt.Errorf("z holds %v", h)
		}
		return nil
	})
	lost := time.Since(began)
	waitHeld(t, "z's units with y alone", units, 10, 10, y)
	t.Logf("z, cut off, let go of %v after %s; y held all 10 after %s", zHeld, lost.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if lost > 2*time.Second+time.Second {
		t.Errorf("z let go %s after it was cut off: the renew deadline is 2s", lost)
	}

	w := startTable(t, cfg, ns, "w", units, a)
	waitHeld(t, "a newcomer given a share", units, 5, 5, y, w)
	v := startTable(t, cfg, ns, "v", units, a)
	waitHeld(t, "a third replica given a share and a shard", units, 3, 4, y, w, v)

	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.twice {
		t.Error(s)
	}
}
