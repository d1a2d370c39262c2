package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/plugin/objects"
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

The plugins come from a host config (--config), or from the Plugin objects of the cluster the
kubeconfig flags point at (--plugin-objects), or both.`,
		Example: `  # For the plugins of a host config whose impersonate.namespace is set:
  wasmrec rbac --config host.yaml | kubectl apply -f -

  # For the Plugin objects in the cluster, the ServiceAccounts in wasmrec-plugins:
  wasmrec rbac --plugin-objects --service-account-namespace wasmrec-plugins`,
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
			if namespace == "" {
				return errors.New("--service-account-namespace is needed: the namespace of the plugins' ServiceAccounts (impersonate.namespace in the host config)")
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
				list, err := d.Resource(objects.GVR).List(cmd.Context(), metav1.ListOptions{})
				if err != nil {
					return fmt.Errorf("listing Plugin objects: %w", err)
				}
				for i := range list.Items {
					c, _, err := objects.ConfigOf(&list.Items[i])
					if err != nil {
						return fmt.Errorf("Plugin %q: %w", list.Items[i].GetName(), err)
					}
					plugins = append(plugins, c)
				}
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
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "a host config file: its plugins, and impersonate.namespace")
	cmd.Flags().BoolVar(&fromCluster, "plugin-objects", false, "the Plugin objects (plugins.wasmrec.dev) of the cluster")
	cmd.Flags().StringVar(&namespace, "service-account-namespace", "", "namespace of the plugins' ServiceAccounts (default the host config's impersonate.namespace)")
	cmd.Flags().StringVar(&hostAccount, "host-service-account", "wasmrec-system/wasmrec", "the host's own ServiceAccount, namespace/name: it is let impersonate the plugins")
	kube.AddFlags(cmd.Flags())
	return cmd
}
