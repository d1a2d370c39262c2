package main

import (
	"errors"
	"fmt"
	"io"

	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

func newRBACCommand(stdout io.Writer) *cobra.Command {
	var configPath, namespace, hostAccount string
	var fromCluster bool
	kube := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "rbac (--config FILE | --plugin-objects)",
		Short: "Print the ServiceAccounts, Roles and bindings that let each plugin act as itself",
		Long: `rbac prints, as YAML to apply with kubectl, one ServiceAccount per plugin, the Roles (one per
namespace the plugin is limited to, else a ClusterRole) that give it exactly its grant, their
bindings, and a Role letting the host impersonate those ServiceAccounts. With them applied and
impersonate.namespace set in the host config, every plugin's writes and events are made as its
own ServiceAccount, and the API server's RBAC bounds each plugin as well as the host does.

The plugins come from a host config (--config), the operator's own. --plugin-objects adds, as
comments for a cluster admin to review and never as objects to apply, what each Plugin and
ClusterPlugin of the cluster asks its ServiceAccount to be allowed: an object's plugin acts as
the ServiceAccount its object names, so its rights are that ServiceAccount's RBAC, which the
namespace's admins grant, not something an object gets by asking.`,
		Example: `  # For the plugins of a host config whose impersonate.namespace is set:
  wasmrec rbac --config host.yaml | kubectl apply -f -

  # What the plugin objects of the cluster ask of their ServiceAccounts, to review:
  wasmrec rbac --plugin-objects`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" && !fromCluster {
				return errors.New("say where the plugins come from: --config FILE, --plugin-objects, or both")
			}
			var plugins []plugin.Config
			if configPath != "" {
				hc, err := plugin.LoadHostConfig(configPath)
				if err != nil {
					return err
				}
				plugins = append(plugins, hc.Plugins...)
				if namespace == "" && hc.Impersonate != nil {
					namespace = hc.Impersonate.Namespace
				}
			}
			if len(plugins) > 0 {
				if namespace == "" {
					return errors.New("--service-account-namespace is needed: the namespace of the plugins' ServiceAccounts (impersonate.namespace in the host config)")
				}
				objs, err := plugin.RBAC(namespace, hostAccount, plugins)
				if err != nil {
					return err
				}
				for i, o := range objs {
					b, err := yaml.Marshal(o)
					if err != nil {
						return err
					}
					if i > 0 {
						fmt.Fprintln(stdout, "---")
					}
					if _, err := stdout.Write(b); err != nil {
						return err
					}
				}
			}
			if fromCluster {
				cfg, err := kube.ToRESTConfig()
				if err != nil {
					return err
				}
				d, err := dynamic.NewForConfig(cfg)
				if err != nil {
					return err
				}
				for _, gvr := range []schema.GroupVersionResource{pluginobjects.ClusterGVR, pluginobjects.GVR} {
					list, err := d.Resource(gvr).List(cmd.Context(), metav1.ListOptions{})
					if err != nil {
						return fmt.Errorf("listing %s: %w", gvr.Resource, err)
					}
					for i := range list.Items {
						fmt.Fprint(stdout, reviewNote(&list.Items[i]))
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "a host config file: its plugins, and impersonate.namespace")
	cmd.Flags().BoolVar(&fromCluster, "plugin-objects", false, "also print, as comments to review, what the Plugin and ClusterPlugin objects of the cluster ask of their ServiceAccounts")
	cmd.Flags().StringVar(&namespace, "service-account-namespace", "", "namespace of the plugins' ServiceAccounts (default the host config's impersonate.namespace)")
	cmd.Flags().StringVar(&hostAccount, "host-service-account", "wasmrec-system/wasmrec", "the host's own ServiceAccount, namespace/name: it is let impersonate the plugins")
	kube.AddFlags(cmd.Flags())
	return cmd
}

// reviewNote is what a plugin object asks of its ServiceAccount, as YAML comments for a cluster
// admin to review: never a Role or binding to apply as it stands.
func reviewNote(u *unstructured.Unstructured) string {
	var b strings.Builder
	cfg, _, err := pluginobjects.ConfigOf(u)
	if err != nil {
		fmt.Fprintf(&b, "# REVIEW: %v\n", err)
		return b.String()
	}
	where := "cluster-wide"
	if len(cfg.Namespaces) > 0 {
		where = "in " + strings.Join(cfg.Namespaces, ", ")
	}
	fmt.Fprintf(&b, "# REVIEW, not to apply as it stands: %s runs as %s, and asks that it may, %s:\n", cfg.Origin, cfg.ServiceAccount.User(), where)
	for _, p := range cfg.Permissions {
		fmt.Fprintf(&b, "#   %s %s: %s\n", abi.Rule{Group: p.Group}.GroupName(), strings.Join(p.Resources, ","), strings.Join(p.Verbs, ","))
	}
	fmt.Fprintf(&b, "# It gets no more than that ServiceAccount's RBAC allows; the host must be let impersonate it.\n")
	return b.String()
}
