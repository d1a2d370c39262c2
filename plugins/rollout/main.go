// Command rollout is a wasmrec plugin that rolls a Deployment when a ConfigMap or Secret it uses
// changes. Deployments opt in with the annotation wasmrec.dev/rollout-on-config-change: "true";
// the plugin keeps a hash of the data of every ConfigMap and Secret the pod template mounts or
// reads into its environment in the pod template's annotation wasmrec.dev/config-hash, so a
// change to that data changes the template and the Deployment rolls.
//
// A change to a ConfigMap or Secret enqueues only the Deployments that use it: the plugin's map
// functions list them through an index of the names each Deployment's pod template refers to,
// as a controller-runtime controller does with a field index and EnqueueRequestsFromMapFunc.
//
// It reads the Deployment typed, with the SDK's generated Kubernetes types (sdk/go/k8s) and
// package client, and the ConfigMaps and Secrets untyped, as JSON maps whose data it hashes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
)

const (
	optIn   = "wasmrec.dev/rollout-on-config-change"
	hashKey = "wasmrec.dev/config-hash"
	// configIndex indexes Deployments by the "ConfigMap/name" and "Secret/name" their pod
	// template uses.
	configIndex = "spec.template.config"
)

func init() {
	r := &reconciler{client: wasmrec.NewClient(), typed: client.New()}
	if err := r.typed.IndexField(context.Background(), &appsv1.Deployment{}, configIndex, func(o client.Object) []string {
		return references(&o.(*appsv1.Deployment).Spec.Template.Spec)
	}); err != nil {
		panic(err)
	}
	wasmrec.Register(wasmrec.Manifest{
		Name: "rollout",
		For:  wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
		Watches: []wasmrec.Watch{
			client.MapWatch(r.configMapUsers),
			client.MapWatch(r.secretUsers),
		},
		Permissions: []wasmrec.Permission{
			{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{Group: "", Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
			{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
		},
	}, r)
}

// configMapUsers enqueues the Deployments whose pod template uses the ConfigMap.
func (r *reconciler) configMapUsers(ctx context.Context, cm *corev1.ConfigMap) []wasmrec.Request {
	return r.users(ctx, cm.Namespace, "ConfigMap/"+cm.Name)
}

// secretUsers enqueues the Deployments whose pod template uses the Secret.
func (r *reconciler) secretUsers(ctx context.Context, s *corev1.Secret) []wasmrec.Request {
	return r.users(ctx, s.Namespace, "Secret/"+s.Name)
}

// users are the Deployments of namespace whose pod template uses ref ("ConfigMap/name").
func (r *reconciler) users(ctx context.Context, namespace, ref string) []wasmrec.Request {
	var ds appsv1.DeploymentList
	if err := r.typed.List(ctx, &ds, client.InNamespace(namespace), client.MatchingFields{configIndex: ref}); err != nil {
		wasmrec.Log.Error(err, "listing the Deployments that use "+ref+": none is enqueued")
		return nil
	}
	reqs := make([]wasmrec.Request, len(ds.Items))
	for i, d := range ds.Items {
		reqs[i] = wasmrec.NewRequest(d.Namespace, d.Name)
	}
	return reqs
}

func main() {}

type reconciler struct {
	client *wasmrec.Client // the ConfigMaps and Secrets, as JSON maps
	typed  *client.Client  // the Deployment
}

func (r *reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	var d appsv1.Deployment
	if err := r.typed.Get(ctx, req.NamespacedName, &d); err != nil {
		return wasmrec.Result{}, client.IgnoreNotFound(err)
	}
	if d.Annotations[optIn] != "true" {
		return wasmrec.Result{}, nil
	}
	hash, sources, err := r.configHash(ctx, d.Namespace, &d.Spec.Template.Spec)
	if err != nil {
		return wasmrec.Result{}, err
	}
	if d.Spec.Template.Annotations[hashKey] == hash {
		return wasmrec.Result{}, nil
	}
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{hashKey: hash},
	}}}}
	ref := wasmrec.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: d.Namespace, Name: d.Name}
	if _, err := r.client.Patch(ctx, ref, "merge", patch); err != nil {
		return wasmrec.Result{}, err
	}
	msg := fmt.Sprintf("config %v changed (hash %s): rolling the deployment", sources, hash)
	_ = r.client.Event(ctx, "Normal", "ConfigChanged", msg)
	wasmrec.Log.Info("stamped a new config hash", "deployment", req, "hash", hash, "sources", sources)
	return wasmrec.Result{}, nil
}

// configHash hashes the data of every ConfigMap and Secret the pod spec uses. A missing one
// hashes as missing, so its creation rolls the Deployment too.
func (r *reconciler) configHash(ctx context.Context, namespace string, spec *corev1.PodSpec) (string, []string, error) {
	refs := references(spec)
	h := sha256.New()
	for _, ref := range refs {
		kind, name, _ := cutKind(ref)
		obj, err := r.client.Get(ctx, "v1", kind, namespace, name)
		fmt.Fprintf(h, "%s\x00", ref)
		switch {
		case wasmrec.IsNotFound(err):
			h.Write([]byte("missing\x00"))
		case err != nil:
			return "", nil, err
		default:
			data, _ := obj.Nested("data")
			binary, _ := obj.Nested("binaryData")
			b, _ := json.Marshal([]any{data, binary}) // encoding/json sorts map keys
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], refs, nil
}

// references lists "ConfigMap/name" and "Secret/name" the pod spec uses, sorted and distinct.
func references(spec *corev1.PodSpec) []string {
	var refs []string
	add := func(kind, name string) {
		if name != "" {
			refs = append(refs, kind+"/"+name)
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add("ConfigMap", v.ConfigMap.Name)
		}
		if v.Secret != nil {
			add("Secret", v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("ConfigMap", s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add("Secret", s.Secret.Name)
				}
			}
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("ConfigMap", e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add("Secret", e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add("Secret", e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

func cutKind(ref string) (kind, name string, ok bool) {
	for i := range ref {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:], true
		}
	}
	return "", ref, false
}
