package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/wasmrec/wasmrec/host/apiready"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
	"github.com/wasmrec/wasmrec/host/tracing"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// hostOptions are the flags run and dev share.
type hostOptions struct {
	cacheDir       string
	verbose        int
	logFormat      string
	metricsAddr    string
	metricsAuth    bool   // /metrics only for clients the API server vouches for, over TLS
	metricsCertDir string // the metrics server's tls.crt and tls.key ("": one of its own)
	probeAddr      string
	pprofAddr      string
	leaderElection *manager.LeaderElection
	// share, if set, shares plugins with the other replicas (run --share-plugins).
	share *ownership.Options
	// warmStandby keeps warm what this replica would take over first (run --warm-standby).
	warmStandby bool
	insecure    []string
	ociCache    string
	// recordings is where plugins' recordings are kept ("": the default, "-": nowhere), and
	// recordingsMax the most one plugin's may take.
	recordings    string
	recordingsMax int64
	kubeAPIQPS    float32
	kubeAPIBurst  int
	// gracefulShutdown bounds a stop; 0 takes the manager's default.
	gracefulShutdown time.Duration
	// pluginObjects runs the plugins of Plugin and ClusterPlugin objects too.
	pluginObjects bool
	// configFile is the host config file run was given; "" for dev, which writes its own.
	configFile string
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

// recordingsDir is where the plugins' recordings are kept: --recordings-dir, by default the user
// cache directory's wasmrec/recordings; "" for nowhere.
func (o *hostOptions) recordingsDir() string {
	switch o.recordings {
	case "-":
		return ""
	case "":
		return defaultRecordingsDir()
	}
	return o.recordings
}

// defaultRecordingsDir is the user cache directory's wasmrec/recordings (the temporary
// directory's, if the user has none).
func defaultRecordingsDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "wasmrec", "recordings")
}

func (o *hostOptions) ociClient(progress io.Writer) (*oci.Client, error) {
	return oci.New(oci.Options{CacheDir: o.ociCache, Insecure: o.insecure, Progress: progress})
}

// metricsTLSConfig is the TLS of the metrics server: the certificate and key in
// --metrics-cert-dir (tls.crt, tls.key), or one the host makes for itself at start, as
// controller-runtime's secure metrics serving does (a scraper then skips verifying it, or is
// given a certificate to verify).
func (o *hostOptions) metricsTLSConfig() (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if o.metricsCertDir != "" {
		crt, key := filepath.Join(o.metricsCertDir, "tls.crt"), filepath.Join(o.metricsCertDir, "tls.key")
		if cert, err = tls.LoadX509KeyPair(crt, key); err != nil {
			return nil, fmt.Errorf("--metrics-cert-dir %s: %w: give a directory with tls.crt and tls.key (a Secret of type kubernetes.io/tls, mounted), or leave it out for a certificate the host makes itself", o.metricsCertDir, err)
		}
	} else {
		host, _ := os.Hostname()
		crtPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(cmp.Or(host, "wasmrec"), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("making the metrics server's certificate: %w", err)
		}
		if cert, err = tls.X509KeyPair(crtPEM, keyPEM); err != nil {
			return nil, err
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
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

// runHost runs the plugins of hc, and those of plugin objects, with extra runnables beside, until
// ctx is done. It wires the parts together; each plugin runs under a plugin.Supervisor.
func runHost(ctx context.Context, cfg *rest.Config, hc *plugin.HostConfig, o *hostOptions, log logr.Logger, extra ...manager.Runnable) (err error) {
	if cfg, err = o.clientConfig(cfg); err != nil {
		return err
	}
	tc, err := tracing.FromEnv()
	if err != nil {
		return err
	}
	defer func() { // the last line, once everything has stopped
		if err == nil {
			log.Info("stopped")
		}
	}()
	if tc != nil {
		shutdown, err := tracing.Start(ctx, tc, version, log.WithName("tracing"))
		if err != nil {
			return err
		}
		defer func() { // what is buffered goes out before the exit, within 5 s
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				log.Error(err, "flushing the last traces")
			}
		}()
		tracing.WrapConfig(cfg)
	}
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
	hopts := plugin.HostOptions{Engine: engine, Metrics: m, Logger: log.WithName("plugin"), WarmStandby: o.warmStandby,
		Recordings: o.recordingsDir(), RecordingsMaxBytes: o.recordingsMax}
	if hopts.Signatures, err = hc.Signatures.Compile(); err != nil {
		return err
	}
	if hopts.OCI, err = o.ociClient(nil); err != nil {
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
		hopts.Share = table
	}
	if hc.Impersonate != nil {
		hopts.Impersonate = hc.Impersonate.Namespace
		log.Info("the host config's plugins act as their own ServiceAccounts", "namespace", hopts.Impersonate)
	}
	// The API server's own readiness: an outage of its etcd shows nowhere else.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	api := apiready.New(dc.RESTClient(), 0, log.WithName("apiserver"))
	if err := mgr.Add(api); err != nil {
		return err
	}
	m.WatchAPIServer(api.Ready)
	host, err := plugin.NewHost(mgr, hopts)
	if err != nil {
		return err
	}
	defer host.Close()
	// Plugin and ClusterPlugin objects run plugins too, once their CRDs are installed.
	if o.pluginObjects {
		resources, err := pluginobjects.New(host, pluginobjects.Options{Logger: log.WithName("plugins"), Policy: hc.PluginObjects})
		if err != nil {
			return err
		}
		if err := mgr.Add(resources); err != nil {
			return err
		}
	}
	var ready atomic.Bool // caches synced and every plugin loaded or refused
	metricsHandler := m.Handler()
	served := map[string]http.Handler{"/metrics": metricsHandler}
	var metricsTLS *tls.Config
	if o.metricsAuth && o.metricsAddr != "0" {
		cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "metrics-auth"))
		if err != nil {
			return err
		}
		served["/metrics"] = metrics.Authorized(cs, metricsHandler, log.WithName("metrics"))
		// The plugins' recordings, to those who may read what each plugin reads.
		served[plugin.RecordingsPath] = host.RecordingsHandler(cs, log.WithName("recordings"))
		// Scrapers send their tokens: over TLS only.
		if metricsTLS, err = o.metricsTLSConfig(); err != nil {
			return err
		}
	}
	if err := serveTLS(mgr, log, "metrics", o.metricsAddr, metricsTLS, served); err != nil {
		return err
	}
	if served[plugin.RecordingsPath] != nil {
		log.Info("the metrics server serves the plugins' recordings too, to those who may read what each plugin reads", "path", plugin.RecordingsPath)
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
		"/readyz":  readyz(ready.Load, readinessOf{host, api}),
	}); err != nil {
		return err
	}
	for _, r := range extra {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}

	// Each plugin of the config runs under a supervisor of its own, as plugin objects' do: it
	// joins the running manager as soon as it has loaded, so small plugins reconcile while a
	// large one still compiles, and one that cannot be loaded is tried again with backoff while
	// the others run.
	var supervisors []*plugin.Supervisor
	for _, pc := range hc.Plugins {
		s := host.Supervise(pc, plugin.SuperviseOptions{})
		if err := mgr.Add(s); err != nil {
			return err
		}
		supervisors = append(supervisors, s)
	}
	inFlight := host.InFlight // config plugins and plugin objects' alike
	setStillRunning(ctx, func() string {
		return fmt.Sprintf("reconciles in flight: %s; still stopping: %s", orNone(inFlight()), orNone(mgr.Running()))
	})
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-mgr.Synced(): // not Elected: a follower is ready too
		case <-mctx.Done():
			return
		}
		for _, s := range supervisors { // each config plugin loaded, or its first try refused
			select {
			case <-s.Tried():
			case <-mctx.Done():
				return
			}
		}
		// The plugins' informers joined after the caches group started: wait for them too.
		if mgr.GetCache().WaitForCacheSync(mctx) {
			ready.Store(true)
		}
	}()
	switch {
	case o.configFile == "" || len(hc.Plugins) > 0: // dev says what it runs itself
	case !o.pluginObjects:
		log.Info("the host config lists no plugins, and plugin objects are not run (--plugin-objects=false): this host runs nothing", "config", o.configFile)
	default:
		log.Info("the host config lists no plugins: this host runs those of Plugin and ClusterPlugin objects", "config", o.configFile)
	}
	if err := mgr.Start(ctx); err != nil {
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
	return serveTLS(mgr, log, name, addr, nil, routes)
}

// serveTLS is serve over TLS with tc (nil: plain HTTP).
func serveTLS(mgr *manager.Manager, log logr.Logger, name, addr string, tc *tls.Config, routes map[string]http.Handler) error {
	if addr == "0" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving %s on %s: %w", name, addr, err)
	}
	scheme := "http://"
	if tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https://"
	}
	mux := http.NewServeMux()
	for path, h := range routes {
		mux.Handle(path, h)
	}
	log.Info("serving "+name, "address", scheme+ln.Addr().String())
	return mgr.Add(&manager.Server{Name: name, Listener: ln, Server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}})
}
