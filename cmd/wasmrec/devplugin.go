package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
	"github.com/wasmrec/wasmrec/internal/build"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// devPlugin is one --plugin of `wasmrec dev`: a module file, or a plugin's folder that dev
// builds, and builds again when its sources change.
type devPlugin struct {
	dir      string // "" for a module file
	module   string // the module file the host follows
	config   plugin.Config
	warnings io.Writer // the compiler's warnings on builds that succeed
}

// loadDevPlugins builds every folder and reads every plugin's settings: a folder's host.yaml
// when it has one (the grant as it will be in production), else the grant the manifest asks for.
func loadDevPlugins(ctx context.Context, paths []string, stdout io.Writer) ([]*devPlugin, error) {
	var out []*devPlugin
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("--plugin %s: %w", p, err)
		}
		dp := &devPlugin{warnings: stdout}
		if st.IsDir() {
			if dp.dir, err = filepath.Abs(p); err != nil {
				return nil, err
			}
			hostYAML := filepath.Join(dp.dir, "host.yaml")
			if _, err := os.Stat(hostYAML); err == nil {
				hc, err := plugin.LoadHostConfig(hostYAML)
				if err != nil {
					return nil, fmt.Errorf("--plugin %s: %w", p, err)
				}
				if len(hc.Plugins) != 1 || strings.HasPrefix(hc.Plugins[0].Module, "oci:") {
					return nil, fmt.Errorf("--plugin %s: %s must hold exactly one plugin whose module is a file, the one this folder builds", p, hostYAML)
				}
				dp.config, dp.module = hc.Plugins[0], hc.Plugins[0].Module
			} else if dp.module, err = build.DefaultOut(dp.dir); err != nil {
				return nil, err
			}
			start := time.Now()
			if _, err := dp.build(); err != nil {
				return nil, fmt.Errorf("--plugin %s: %w", p, err)
			}
			fmt.Fprintf(stdout, "built %s in %s\n", dp.module, time.Since(start).Round(100*time.Millisecond))
		} else if dp.module, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		if dp.config.Name == "" {
			b, err := os.ReadFile(dp.module)
			if err != nil {
				return nil, err
			}
			in, err := checkModule(ctx, dp.module, b, "", 0)
			if err != nil {
				return nil, fmt.Errorf("--plugin %s: %w", p, err)
			}
			dp.config = plugin.Config{Name: in.Manifest.Name, Module: dp.module, Permissions: in.Manifest.Permissions}
			fmt.Fprintf(stdout, "plugin %s has no host.yaml: dev grants it what its manifest asks for\n", dp.config.Name)
		}
		for i, other := range out {
			if other.config.Name == dp.config.Name {
				where := "the Name of its manifest"
				if dp.dir != "" && dp.config.Module != "" && fileExists(filepath.Join(dp.dir, "host.yaml")) {
					where = "name: in " + filepath.Join(dp.dir, "host.yaml") + " (a copied folder keeps the name of the one it was copied from)"
				}
				return nil, fmt.Errorf("--plugin %s: its plugin is named %q, as that of --plugin %s is: two plugins of one host need two names: rename it with %s", p, dp.config.Name, paths[i], where)
			}
		}
		out = append(out, dp)
	}
	return out, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// build compiles the folder to a file beside the module and renames it into place, so that the
// host's file watcher sees one whole new module; changed is false when it is the same, byte
// for byte, as the module already there, which is then left as it is. wasmrec test or build
// run after it find the module up to date.
func (dp *devPlugin) build() (changed bool, err error) {
	_, err = build.Build(dp.dir, build.Options{Out: dp.module, Staged: true, Changed: &changed, Warnings: dp.warnings})
	return changed, err
}

// sources fingerprints what a build reads: the names, sizes and times of the folder's files,
// less modules, samples and CRDs, and the files the build itself generates (a build that
// rewrites them would otherwise start another).
func (dp *devPlugin) sources() string {
	var b strings.Builder
	_ = filepath.WalkDir(dp.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".yaml" {
			return nil // host.yaml, samples and CRDs are followed on their own
		}
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != dp.dir && (strings.HasPrefix(name, ".") || name == "samples" || name == "crds") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(name, "zz_generated.wasmrec") {
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".c", ".h", ".mod", ".sum":
			if info, err := d.Info(); err == nil {
				fmt.Fprintf(&b, "%s %d %d\n", path, info.Size(), info.ModTime().UnixNano())
			}
		}
		return nil
	})
	return b.String()
}

// fingerprint is the names, sizes and times of files matching pattern in the folder.
func (dp *devPlugin) fingerprint(pattern string) string {
	var b strings.Builder
	matches, _ := filepath.Glob(filepath.Join(dp.dir, pattern))
	for _, m := range matches {
		if info, err := os.Stat(m); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", m, info.Size(), info.ModTime().UnixNano())
		}
	}
	return b.String()
}

// objectFiles fingerprints the folder's CRDs and samples.
func (dp *devPlugin) objectFiles() string {
	return dp.fingerprint("crds/*.yaml") + dp.fingerprint("samples/*.yaml")
}

// devRebuilder builds a plugin's folder again when its sources change; the host swaps to the new
// module as it does for any module file that changes. A failed build leaves the running version,
// and its compiler output goes to out as the compiler wrote it. New or changed crds/*.yaml are
// installed and samples/*.yaml applied; a changed host.yaml is applied to the Plugin object.
type devRebuilder struct {
	plugins []*devPlugin
	cfg     *rest.Config
	// onCluster: the plugins run against a cluster of the user's (dev --kubeconfig), as a host
	// config's plugins, not as Plugin objects: host.yaml applies at the next start, and samples
	// are not forced over fields another manager owns.
	onCluster bool
	log       logr.Logger
	out       io.Writer
}

// newDevRebuilder follows the plugins that are folders; nil if none is.
func newDevRebuilder(plugins []*devPlugin, cfg *rest.Config, onCluster bool, log logr.Logger, out io.Writer) *devRebuilder {
	var watched []*devPlugin
	for _, dp := range plugins {
		if dp.dir != "" {
			watched = append(watched, dp)
		}
	}
	if len(watched) == 0 {
		return nil
	}
	return &devRebuilder{plugins: watched, cfg: cfg, onCluster: onCluster, log: log.WithName("dev"), out: out}
}

// Name names it in the manager's messages.
func (*devRebuilder) Name() string { return "dev's rebuilder of plugins" }

func (r *devRebuilder) Start(ctx context.Context) error {
	seen, crds, grants := map[*devPlugin]string{}, map[*devPlugin]string{}, map[*devPlugin]string{}
	for _, dp := range r.plugins {
		seen[dp], crds[dp], grants[dp] = dp.sources(), dp.objectFiles(), dp.fingerprint("host.yaml")
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, dp := range r.plugins {
			log := r.log.WithValues("plugin", dp.config.Name)
			if now := dp.objectFiles(); now != crds[dp] {
				crds[dp] = now
				if err := installFolderObjects(ctx, r.cfg, []*devPlugin{{dir: dp.dir}}, r.out, !r.onCluster); err != nil {
					log.Error(err, "installing the folder's CRDs")
				}
			}
			if now := dp.fingerprint("host.yaml"); now != grants[dp] && r.onCluster {
				grants[dp] = now
				log.Info("host.yaml changed: restart dev to apply it (on a cluster of yours, dev's plugins are no Plugin objects that could take it at once)")
			} else if now != grants[dp] {
				err := dp.reloadHostYAML(ctx, r.cfg)
				if err != nil {
					// An editor that truncates and writes may be caught between the two: a
					// file that changed again is read at the next poll, not reported.
					time.Sleep(100 * time.Millisecond)
				}
				switch {
				case err == nil:
					grants[dp] = now
					log.Info("host.yaml changed: its settings are applied to the Plugin object")
				case dp.fingerprint("host.yaml") == now:
					grants[dp] = now
					log.Error(err, "host.yaml changed, but its settings are not applied: fix the file")
				}
			}
			now := dp.sources()
			if now == seen[dp] {
				continue
			}
			seen[dp] = now
			start := time.Now()
			changed, err := dp.build()
			switch {
			case err != nil:
				fmt.Fprintf(r.out, "%s: build failed:\n%v\n", dp.dir, err)
				log.Error(nil, "build failed (the compiler's output is above): the running version stays")
			case !changed:
				log.Info("rebuilt: the same module as the one running, nothing to swap", "took", time.Since(start).Round(100*time.Millisecond).String())
			default:
				log.Info("rebuilt: swapping to the new module", "took", time.Since(start).Round(100*time.Millisecond).String())
			}
		}
	}
}

// installFolderObjects installs each plugin folder's crds/*.yaml, then applies its
// samples/*.yaml, so that the plugin has something to reconcile; force takes over the fields
// of a sample that another field manager owns. A sample whose kind is not served is said and
// skipped.
func installFolderObjects(ctx context.Context, cfg *rest.Config, plugins []*devPlugin, stdout io.Writer, force bool) error {
	for _, dp := range plugins {
		if dp.dir == "" {
			continue
		}
		crdFiles, _ := filepath.Glob(filepath.Join(dp.dir, "crds", "*.yaml"))
		if len(crdFiles) > 0 {
			crds, err := crd.Read(crdFiles...)
			if err == nil {
				err = crd.Install(ctx, cfg, crds, 0)
			}
			if err != nil {
				return fmt.Errorf("installing %s: %w", strings.Join(crdFiles, ", "), err)
			}
			fmt.Fprintf(stdout, "installed the CRDs in %s\n", filepath.Join(dp.dir, "crds"))
		}
		samples, _ := filepath.Glob(filepath.Join(dp.dir, "samples", "*.yaml"))
		for _, s := range samples {
			if err := applyFile(ctx, cfg, s, stdout, force); err != nil {
				fmt.Fprintf(stdout, "%v: fix the file; the plugin runs without it\n", err)
			}
		}
	}
	return nil
}

// applyFile server-side applies every object of a YAML file, as the field manager wasmrec-dev,
// forcing conflicts if force is set.
func applyFile(ctx context.Context, cfg *rest.Config, path string, stdout io.Writer, force bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			hint := "put its CRD in the folder's crds/"
			if kinds.BuiltInGroup(gvk.Group) {
				hint = kinds.NotBuiltIn(gvk)
			}
			fmt.Fprintf(stdout, "%s: %s is not served (%s): not applied\n", path, kinds.String(u.GetAPIVersion(), u.GetKind()), hint)
			continue
		}
		ri := dynamic.ResourceInterface(client.Resource(m.Resource))
		if m.Scope.Name() == "namespace" {
			if u.GetNamespace() == "" {
				u.SetNamespace(metav1.NamespaceDefault)
			}
			ri = client.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "wasmrec-dev", Force: &force}); err != nil {
			return fmt.Errorf("%s: applying %s %s: %w", path, kinds.String(u.GetAPIVersion(), u.GetKind()), u.GetName(), err)
		}
		name := u.GetName()
		if u.GetNamespace() != "" {
			name = u.GetNamespace() + "/" + name
		}
		fmt.Fprintf(stdout, "applied %s %s from %s\n", kinds.String(u.GetAPIVersion(), u.GetKind()), name, filepath.Base(path))
	}
}

// pluginNames lists the plugins' names, sorted.
func pluginNames(plugins []*devPlugin) []string {
	var names []string
	for _, dp := range plugins {
		names = append(names, dp.config.Name)
	}
	slices.Sort(names)
	return names
}

// reloadHostYAML reads the folder's host.yaml again and applies it to the plugin's Plugin object,
// whose controller reloads the plugin with the new settings.
func (dp *devPlugin) reloadHostYAML(ctx context.Context, cfg *rest.Config) error {
	hc, err := plugin.LoadHostConfig(filepath.Join(dp.dir, "host.yaml"))
	if err != nil {
		return err
	}
	if len(hc.Plugins) != 1 || hc.Plugins[0].Module != dp.module {
		return fmt.Errorf("host.yaml must still hold exactly one plugin, whose module is %s", dp.module)
	}
	if hc.Plugins[0].Name != dp.config.Name {
		return fmt.Errorf("host.yaml renames plugin %q to %q: stop dev and run it again to rename", dp.config.Name, hc.Plugins[0].Name)
	}
	dp.config = hc.Plugins[0]
	return applyPluginObject(ctx, cfg, dp.config, dp.warnings)
}

// devAccounts is the namespace of the ServiceAccounts dev's plugins act as.
const devAccounts = "wasmrec-plugins"

// applyPluginObject server-side applies the ClusterPlugin object that runs c, as wasmrec-dev,
// with a ServiceAccount whose RBAC is exactly c's grant (what `wasmrec rbac` prints), making the
// namespaces c names if they are missing: on the local control plane the developer is the
// cluster admin who reviews it.
func applyPluginObject(ctx context.Context, cfg *rest.Config, c plugin.Config, stdout io.Writer) error {
	if err := applyRBAC(ctx, cfg, devAccounts, c, stdout); err != nil {
		return fmt.Errorf("the ServiceAccount and RBAC of %q: %w", c.Name, err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	delete(spec, "name") // the object's name
	for k, v := range spec {
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			delete(spec, k) // settings left at their defaults
		}
	}
	spec["serviceAccount"] = map[string]any{"namespace": devAccounts, "name": c.Name}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pluginobjects.ClusterGVK.GroupVersion().String(), "kind": pluginobjects.ClusterGVK.Kind,
		"metadata": map[string]any{"name": c.Name}, "spec": spec,
	}}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	force := true
	if _, err := client.Resource(pluginobjects.ClusterGVR).Patch(ctx, c.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "wasmrec-dev", Force: &force}); err != nil {
		return fmt.Errorf("applying the ClusterPlugin object for %q: %w", c.Name, err)
	}
	return nil
}

// applyRBAC creates, or updates, the ServiceAccount of c in namespace and the Roles that grant
// it c's permissions, as `wasmrec rbac` prints them. The dev host runs as the control plane's
// admin: it needs no right to impersonate.
func applyRBAC(ctx context.Context, cfg *rest.Config, namespace string, c plugin.Config, stdout io.Writer) error {
	objs, err := plugin.RBAC(namespace, "wasmrec-system/wasmrec", []plugin.Config{c})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The ServiceAccounts' namespace, and the plugin's own, where its Roles go: a control plane
	// dev started has only default.
	for i, ns := range append([]string{namespace}, c.Namespaces...) {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return fmt.Errorf("creating namespace %q: %w", ns, err)
		case i > 0:
			fmt.Fprintf(stdout, "created namespace %s, one of plugin %q's in its host.yaml\n", ns, c.Name)
		}
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *rbacv1.ClusterRole:
			if _, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = cs.RbacV1().ClusterRoles().Update(ctx, o, metav1.UpdateOptions{})
			}
		case *rbacv1.ClusterRoleBinding:
			if _, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case *rbacv1.Role:
			if o.Name == "wasmrec-impersonate-plugins" {
				continue
			}
			if _, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = cs.RbacV1().Roles(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			}
		case *rbacv1.RoleBinding:
			if o.Name == "wasmrec-impersonate-plugins" {
				continue
			}
			if _, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
