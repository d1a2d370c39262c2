package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/recording"
)

func newRunCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &hostOptions{}
	var configPath string
	kube := genericclioptions.NewConfigFlags(true)
	var le struct {
		enabled, share  bool
		namespace, name string
	}
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the plugins a config file lists against a cluster",
		Long: `run loads every plugin the config file lists (module, granted permissions, concurrency,
rate limits, timeout, memory cap) and runs their controllers against the cluster the kubeconfig
flags point at, as kubectl would. A plugin that cannot be loaded is reported and tried again
with backoff (at once when its module file changes). It also runs the plugins that Plugin and
ClusterPlugin objects (wasmrec.dev) describe, once their CRDs are installed, each as the
ServiceAccount its object names, within the config's pluginObjects bounds and sources;
--plugin-objects=false leaves those to another host.

Replicas run one of two ways. With --leader-elect, one replica runs every plugin and the others
wait with warm caches. With --share-plugins, they split the plugins: each plugin, and each shard
of a plugin with shards set, has a Lease, and each replica holds at most its fair share; a
replica that stops hands its share back, and one that dies is taken over when its Leases expire
(15s). Replicas without either flag each run every plugin.

Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, each
reconcile is a trace (plugin, key, module digest, result) with a span per host call and, under
it, the API request it sent, exported over OTLP (http/protobuf, or grpc with
OTEL_EXPORTER_OTLP_PROTOCOL=grpc); the reconcile's log lines carry its traceID. The other
standard OTEL_* variables apply (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, headers, TLS). Without
an endpoint nothing is traced.`,
		Example: `  # The plugins of host.yaml, against the cluster of the current kubeconfig context:
  wasmrec run --config host.yaml

  # Two replicas, one running the plugins at a time, with metrics and probes, logging JSON:
  wasmrec run --config host.yaml --leader-elect --metrics-bind-address :8080 \
    --health-probe-bind-address :8081 --log-format json

  # Run this on each replica: they split the plugins, and the shards of those with shards: N:
  wasmrec run --config host.yaml --share-plugins --metrics-bind-address :8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkFlags(); err != nil {
				return err
			}
			hc, err := plugin.LoadHostConfig(configPath)
			if err != nil {
				return err
			}
			cfg, err := kube.ToRESTConfig()
			if err != nil {
				return err
			}
			if le.namespace == "" {
				le.namespace = podNamespace()
			}
			// A Lease name; with --share-plugins also the prefix of the others and a label value.
			valid := validation.IsDNS1123Subdomain
			if le.share {
				valid = validation.IsDNS1123Label
			}
			if errs := valid(le.name); (le.enabled || le.share) && len(errs) > 0 {
				return fmt.Errorf("--leader-election-id %q names the Leases: %s", le.name, strings.Join(errs, "; "))
			}
			switch {
			case le.enabled && le.share:
				return errors.New("--leader-elect and --share-plugins are two ways to run replicas: choose one (--leader-elect: one replica runs every plugin; --share-plugins: replicas split the plugins and their shards)")
			case o.warmStandby && !le.share:
				return errors.New("--warm-standby keeps warm what this replica would take over from the others: it needs --share-plugins (with --leader-elect, the replicas waiting keep every plugin warm already)")
			case le.enabled:
				o.leaderElection = &manager.LeaderElection{Namespace: le.namespace, Name: le.name, Identity: replicaIdentity()}
			case le.share:
				o.share = &ownership.Options{Namespace: le.namespace, Group: le.name, Identity: replicaIdentity()}
			}
			o.configFile = configPath
			return runHost(cmd.Context(), cfg, hc, o, o.logger(stderr))
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the host config file (YAML): which plugins to run and with what")
	cmd.Flags().BoolVar(&o.pluginObjects, "plugin-objects", true, "also run the plugins Plugin and ClusterPlugin objects describe (false: only the config's)")
	_ = cmd.MarkFlagRequired("config")
	cmd.Flags().BoolVar(&le.enabled, "leader-elect", false, "run plugins only on the replica holding the Lease (run two or more replicas for failover)")
	cmd.Flags().BoolVar(&le.share, "share-plugins", false, "split the plugins, and the shards of plugins with shards set, among the replicas run with this flag: each holds a Lease per plugin or shard it runs, at most its fair share")
	cmd.Flags().BoolVar(&o.warmStandby, "warm-standby", false, "with --share-plugins, keep synced the informers of the plugins and shards this replica would take over first, so it starts them on a warm cache (more memory: about one more share)")
	cmd.Flags().StringVar(&le.namespace, "leader-election-namespace", "", "namespace of the Leases (default: the pod's namespace, else default)")
	cmd.Flags().StringVar(&le.name, "leader-election-id", "wasmrec", "name of the Lease; with --share-plugins, the prefix of every Lease's name")
	o.addFlags(cmd, true)
	kube.AddFlags(cmd.Flags())
	return cmd
}

func (o *hostOptions) addOCIFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&o.insecure, "insecure", nil, "registries (host:port) to reach over plain HTTP; repeat or separate with commas")
	cmd.Flags().StringVar(&o.ociCache, "oci-cache", "", `directory keeping pulled modules by digest (default the user cache directory's wasmrec/oci; "-" for none)`)
}

// replicaIdentity names this process among the replicas: the pod's name (the hostname in a pod)
// and a random suffix, so that a restarted process is a new replica.
func replicaIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + uuid.NewString()[:8]
}

// podNamespace is the namespace this process runs in, or "default" outside a pod.
func podNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "default"
}

// addFlags adds the host's flags; metricsAuth is --metrics-auth's default (dev's control plane
// is the user's own: off there).
func (o *hostOptions) addFlags(cmd *cobra.Command, metricsAuth bool) {
	cmd.Flags().StringVar(&o.cacheDir, "compilation-cache", "", `directory for compiled modules (default the user cache directory's wasmrec/wazero; "-" for none)`)
	cmd.Flags().StringVar(&o.recordings, "recordings-dir", "", `directory keeping the plugins' recordings (their settings' record), a directory per plugin (default the user cache directory's wasmrec/recordings; "-" for none: a plugin asking to record is refused)`)
	cmd.Flags().Int64Var(&o.recordingsMax, "recordings-max-bytes", recording.DefaultMaxBytes, "the most one plugin's recordings may take on disk; a plugin's record.maxBytes may ask for less")
	cmd.Flags().IntVarP(&o.verbose, "verbose", "v", 0, "log verbosity: 1 (DEBUG) adds each reconcile's start and end and informer detail; 2 (TRACE) also the local control plane's own logs, for dev")
	cmd.Flags().StringVar(&o.logFormat, "log-format", "text", "log line format: text (key=value) or json")
	cmd.Flags().StringVar(&o.metricsAddr, "metrics-bind-address", "0", `address to serve Prometheus metrics on at /metrics ("0" for none; ":8080" for all interfaces)`)
	cmd.Flags().BoolVar(&o.metricsAuth, "metrics-auth", metricsAuth, "serve /metrics over HTTPS, only to clients whose bearer token the API server accepts (TokenReview) and whose user may get /metrics (SubjectAccessReview): the metrics name every plugin and its module")
	cmd.Flags().StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "with --metrics-auth, a directory holding the metrics server's tls.crt and tls.key (default: a self-signed certificate made at start)")
	cmd.Flags().StringVar(&o.probeAddr, "health-probe-bind-address", "0", `address to serve /healthz and /readyz on ("0" for none; ":8081" for all interfaces)`)
	cmd.Flags().StringVar(&o.pprofAddr, "pprof-bind-address", "0", `address to serve Go's profiles on at /debug/pprof/ ("0" for none)`)
	cmd.Flags().Float32Var(&o.kubeAPIQPS, "kube-api-qps", 0, "client-side limit on the host's API requests per second, shared by all plugins (default 0: none, as controller-runtime; the API server's priority and fairness paces clients)")
	cmd.Flags().IntVar(&o.kubeAPIBurst, "kube-api-burst", 0, "burst of --kube-api-qps (default twice the QPS)")
	cmd.Flags().DurationVar(&o.gracefulShutdown, "graceful-shutdown-timeout", manager.DefaultGracefulShutdownTimeout, "how long a stop waits for in-flight reconciles before it exits non-zero, naming them")
	o.addOCIFlags(cmd)
}
