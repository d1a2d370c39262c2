package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/plugin/objects"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/backoff"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// hostOptions are the flags run and dev share.
type hostOptions struct {
	cacheDir       string
	verbose        int
	logFormat      string
	metricsAddr    string
	probeAddr      string
	pprofAddr      string
	leaderElection *manager.LeaderElection
	// share, if set, shares plugins with the other replicas (run --share-plugins).
	share *ownership.Options
	// warmStandby keeps warm what this replica would take over first (run --warm-standby).
	warmStandby  bool
	insecure     []string
	ociCache     string
	kubeAPIQPS   float32
	kubeAPIBurst int
	// gracefulShutdown bounds a stop; 0 takes the manager's default.
	gracefulShutdown time.Duration
	// pluginObjects runs the plugins of Plugin objects too.
	pluginObjects bool
}

// clientConfig is cfg with the host's client-side limit on API requests: none unless
// --kube-api-qps sets one (as controller-runtime does: the API server's priority and fairness
// protects it, and client-go's default of 5 requests/s, burst 10, shared by every plugin, made
// a controller of 2000 objects take minutes). The burst defaults to twice the QPS.
func (o *hostOptions) clientConfig(cfg *rest.Config) (*rest.Config, error) {
	if o.kubeAPIBurst > 0 && o.kubeAPIQPS <= 0 {
		return nil, errors.New("--kube-api-burst needs --kube-api-qps: without it the host's clients have no limit to burst past")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // client-go: a negative QPS is no limit
	if o.kubeAPIQPS > 0 {
		cfg.QPS, cfg.Burst = o.kubeAPIQPS, o.kubeAPIBurst
		if cfg.Burst <= 0 {
			cfg.Burst = max(int(2*o.kubeAPIQPS), 1)
		}
	}
	return cfg, nil
}

func (o *hostOptions) ociClient(progress io.Writer) (*oci.Client, error) {
	return oci.New(oci.Options{CacheDir: o.ociCache, Insecure: o.insecure, Progress: progress})
}

// checkFlags refuses flag values no command could use.
func (o *hostOptions) checkFlags() error {
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("--log-format %q: use text or json", o.logFormat)
	}
	return nil
}

// logger writes text (key=value) or JSON lines, with the level named: ERROR, WARN, INFO, then
// DEBUG for -v 1 and TRACE beyond (logr's V(n) is slog's level -n).
func (o *hostOptions) logger(w io.Writer) logr.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(-o.verbose), ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey {
			if l, ok := a.Value.Any().(slog.Level); ok {
				a.Value = slog.StringValue(levelName(l))
			}
		}
		if a.Value.Kind() == slog.KindDuration { // "30s" in JSON too, not nanoseconds
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
	if o.logFormat == "json" {
		return logr.FromSlogHandler(slog.NewJSONHandler(w, opts))
	}
	return logr.FromSlogHandler(slog.NewTextHandler(w, opts))
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	case l == -1:
		return "DEBUG"
	}
	return "TRACE"
}

// runHost runs the plugins of hc, with extra runnables beside, until ctx is done. The manager
// starts at once and each plugin joins it as soon as it has loaded, so small plugins reconcile
// while a large one still compiles. A plugin that fails to load is reported and tried again with
// backoff while the others run; runHost fails if none loads at the first attempt.
func runHost(ctx context.Context, cfg *rest.Config, hc *plugin.HostConfig, o *hostOptions, log logr.Logger, extra ...manager.Runnable) (err error) {
	if cfg, err = o.clientConfig(cfg); err != nil {
		return err
	}
	defer func() { // the last line, once everything has stopped
		if err == nil {
			log.Info("stopped")
		}
	}()
	mopts := manager.Options{Logger: log.WithName("manager"), LeaderElection: o.leaderElection}
	if o.gracefulShutdown > 0 {
		mopts.GracefulShutdownTimeout = &o.gracefulShutdown
	}
	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		return err
	}
	engine, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: o.cacheDir})
	if err != nil {
		return err
	}
	defer engine.Close(context.WithoutCancel(ctx))
	m := metrics.New()
	m.WatchInformers(func() int { return len(mgr.GetCache().Failures()) })
	m.WatchInformerObjects(func() []metrics.InformerObjects {
		var out []metrics.InformerObjects
		for k, n := range mgr.GetCache().Sizes() {
			out = append(out, metrics.InformerObjects{Kind: kinds.GVK(k.GroupVersionKind), Namespace: k.Namespace, Shard: k.Shard.String(), Objects: n})
		}
		return out
	})
	host, err := plugin.NewHost(mgr, engine, m, log.WithName("plugin"))
	if err != nil {
		return err
	}
	defer host.Close()
	if host.OCI, err = o.ociClient(nil); err != nil {
		return err
	}
	if le := o.leaderElection; le != nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if sharing, err := ownership.SharingReplicas(ctx, cs, le.Namespace, le.Name); err == nil && len(sharing) > 0 {
			log.Error(nil, "replicas run with --share-plugins share the plugins in this Lease's group: this host, elected by --leader-elect, would run every plugin beside them, so each plugin runs twice; run every replica with --leader-elect, or every one with --share-plugins",
				"lease", le.Namespace+"/"+le.Name, "sharing", sharing)
		}
	}
	if o.share != nil {
		cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "ownership"))
		if err != nil {
			return err
		}
		share := *o.share
		share.Logger = log.WithName("ownership")
		table, err := ownership.New(cs, share)
		if err != nil {
			return err
		}
		if err := mgr.Add(table); err != nil {
			return err
		}
		host.Share = table
		host.WarmStandby = o.warmStandby
	}
	if hc.Impersonate != nil {
		host.Impersonate = hc.Impersonate.Namespace
		log.Info("plugins act as their own ServiceAccounts", "namespace", host.Impersonate)
	}
	// Plugin objects (plugins.wasmrec.dev) run plugins too, once their CRD is installed.
	if o.pluginObjects {
		resources, err := objects.New(host, log.WithName("plugins"))
		if err != nil {
			return err
		}
		if err := mgr.Add(resources); err != nil {
			return err
		}
	}
	var ready atomic.Bool // caches synced and every plugin loaded or refused
	if err := serve(mgr, log, "metrics", o.metricsAddr, map[string]http.Handler{"/metrics": m.Handler()}); err != nil {
		return err
	}
	if err := serve(mgr, log, "pprof", o.pprofAddr, map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}); err != nil {
		return err
	}
	if err := serve(mgr, log, "health probes", o.probeAddr, map[string]http.Handler{
		"/healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }),
		"/readyz":  readyz(ready.Load, host),
	}); err != nil {
		return err
	}
	for _, r := range extra {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}

	mctx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mctx) }()

	var (
		wg       sync.WaitGroup // first attempts
		retries  sync.WaitGroup // plugins whose module could not be loaded, trying again
		mu       sync.Mutex
		loadErrs []error
		loaded   int
		plugins  []*plugin.Plugin // closed once the manager has stopped
	)
	inFlight := host.InFlight // config plugins and Plugin objects' alike
	setStillRunning(ctx, func() string {
		return fmt.Sprintf("reconciles in flight: %s; runnables still running: %s", orNone(inFlight()), orNone(mgr.Running()))
	})
	defer func() {
		stop() // the manager may have stopped on its own: end the retries too
		retries.Wait()
		// The manager has stopped, within its graceful timeout or not: closing does not wait
		// again for guests still running (one that loops without being interruptible would hold
		// the exit for its whole reconcile timeout); the process is about to end anyway.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		for _, p := range plugins {
			if err := p.Close(closeCtx); err != nil && len(p.InFlight()) == 0 {
				log.Error(err, "closing plugin", "plugin", p.Name())
			}
		}
	}()
	// start loads a plugin and adds it, with the triggers that swap in a new module, to the
	// running manager. fetched is false when the module itself could not be had: not found,
	// unreachable, or refused.
	start := func(pc plugin.Config) (fetched bool, err error) {
		p, err := host.LoadFile(mctx, pc)
		if err != nil {
			return false, err
		}
		mu.Lock()
		plugins = append(plugins, p)
		mu.Unlock()
		_, err = host.Run(p)
		for _, t := range p.Triggers() {
			if err != nil {
				break
			}
			err = mgr.Add(t)
		}
		if err == nil {
			m := p.Module().Manifest()
			log.Info("plugin loaded", "plugin", pc.Name, "digest", p.Module().ShortDigest(), "for", kinds.String(m.For.APIVersion, m.For.Kind), "module", pc.Module)
		}
		return true, err
	}
	// retry loads a plugin whose module could not be had, on the backoff.ModuleFetch schedule
	// (1 s doubling to 5 min): a registry that was down, or a module file not there yet, is
	// picked up without a restart.
	retry := func(pc plugin.Config, delays *backoff.Schedule) {
		for {
			if !host.WaitForModule(mctx, pc.Module, delays.Last()) { // a module file that appears is tried at once
				return
			}
			fetched, err := start(pc)
			if err == nil || mctx.Err() != nil {
				return
			}
			if fetched {
				log.Error(err, "plugin not started", "plugin", pc.Name)
				return
			}
			next := delays.Next()
			if errors.As(err, new(*plugin.RefusedBeforeError)) {
				log.Info("plugin still refused: its module is looked at again when it changes", "plugin", pc.Name, "refused", err.Error(), "in", next.Round(time.Millisecond))
				continue
			}
			log.Error(err, "plugin still not loaded; trying again", "plugin", pc.Name, "in", next.Round(time.Millisecond))
		}
	}
	type failure struct {
		pc  plugin.Config
		err error
	}
	var unloaded []failure // modules that could not be had at the first attempt
	for _, pc := range hc.Plugins {
		wg.Go(func() {
			fetched, err := start(pc)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				loaded++
				return
			}
			loadErrs = append(loadErrs, err)
			if mctx.Err() != nil {
				return
			}
			if fetched {
				log.Error(err, "plugin not started; the others run", "plugin", pc.Name)
				return
			}
			unloaded = append(unloaded, failure{pc, err})
		})
	}
	wg.Wait()
	if loaded > 0 { // with none loaded, run fails below instead
		for _, f := range unloaded {
			delays := backoff.ModuleFetch.Start()
			log.Error(f.err, "plugin not loaded; the others run, and it is tried again", "plugin", f.pc.Name, "in", delays.Next().Round(time.Millisecond))
			retries.Go(func() { retry(f.pc, delays) })
		}
	}
	go func() {
		select {
		case <-mgr.Synced(): // not Elected: a follower is ready too
			// The plugins' informers joined after the caches group started: wait for them too.
			if mgr.GetCache().WaitForCacheSync(mctx) {
				ready.Store(true)
			}
		case <-mctx.Done():
		}
	}()
	if loaded == 0 && len(hc.Plugins) > 0 && mctx.Err() == nil {
		stop()
		return errors.Join(fmt.Errorf("no plugin in the config could be loaded: %w", errors.Join(loadErrs...)), <-stopped)
	}
	if err := <-stopped; err != nil {
		if running := inFlight(); len(running) > 0 { // a stop that timed out: say what it waited for
			return fmt.Errorf("%w\nreconciles still in flight: %s", err, strings.Join(running, "; "))
		}
		return err
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// serve adds an HTTP server on addr ("0" for none) to the manager's first group.
func serve(mgr *manager.Manager, log logr.Logger, name, addr string, routes map[string]http.Handler) error {
	if addr == "0" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving %s on %s: %w", name, addr, err)
	}
	mux := http.NewServeMux()
	for path, h := range routes {
		mux.Handle(path, h)
	}
	log.Info("serving "+name, "address", "http://"+ln.Addr().String())
	return mgr.Add(&manager.Server{Name: name, Listener: ln, Server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}})
}
