package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
	appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

var manifest = wasmrec.Manifest{
	Name: "typed",
	For:  wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
	Permissions: []wasmrec.Permission{
		{Group: "apps", Resources: []string{"deployments", "deployments/status"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
	},
}

func configMap(name string, labels map[string]string, data map[string]string) *wasmrec.Object {
	o := wasmrec.NewObject("v1", "ConfigMap", "demo", name)
	l := map[string]any{}
	for k, v := range labels {
		l[k] = v
	}
	_ = o.SetNested(l, "metadata", "labels")
	m := map[string]any{}
	for k, v := range data {
		m[k] = v
	}
	o.Object["data"] = m
	return o
}

func TestGetAndListReadTypedObjects(t *testing.T) {
	cluster := fake.NewCluster(manifest,
		configMap("a", map[string]string{"app": "web"}, map[string]string{"k": "v"}),
		configMap("b", map[string]string{"app": "db"}, nil))
	c := client.From(cluster.Client())
	ctx := context.Background()

	var cm corev1.ConfigMap
	cm.Data = map[string]string{"stale": "x"} // a read leaves nothing of this
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "a"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "a" || cm.Data["k"] != "v" || len(cm.Data) != 1 || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.UID == "" {
		t.Fatalf("read %+v", cm)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "missing"}, &cm)
	if !wasmrec.IsNotFound(err) || client.IgnoreNotFound(err) != nil {
		t.Fatalf("a missing object: %v", err)
	}

	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace("demo"), client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Kind != "ConfigMapList" {
		t.Fatalf("listed %+v", list)
	}
	if err := c.List(ctx, &list, client.HasLabels{"app"}); err != nil || len(list.Items) != 2 {
		t.Fatalf("listed %d (%v), want 2", len(list.Items), err)
	}
}

func TestWritesFillTheObjectWithWhatWasStored(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()

	replicas := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil { // TypeMeta comes from the type
		t.Fatal(err)
	}
	if d.UID == "" || d.ResourceVersion == "" || d.Generation != 1 || d.Kind != "Deployment" {
		t.Fatalf("created %+v", d.ObjectMeta)
	}
	again := d.DeepCopy()
	again.ResourceVersion = ""
	if err := c.Create(ctx, again); !wasmrec.IsAlreadyExists(err) || client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("a second create: %v", err)
	}

	stale := d.DeepCopy()
	*d.Spec.Replicas = 3
	if err := c.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 {
		t.Fatalf("generation %d after a spec change, want 2", d.Generation)
	}
	*stale.Spec.Replicas = 5
	if err := c.Update(ctx, stale); !wasmrec.IsConflict(err) {
		t.Fatalf("an update from a stale read: %v, want a conflict", err)
	}

	orig := d.DeepCopy()
	d.Labels["tier"] = "front"
	delete(d.Labels, "app")
	if err := c.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	stored, _ := cluster.Get("apps/v1", "Deployment", "demo", "web")
	if l := stored.Labels(); l["tier"] != "front" || l["app"] != "" {
		t.Fatalf("labels after the merge patch: %v", l)
	}
	if err := c.Patch(ctx, stale, client.MergeFrom(stale.DeepCopy(), client.MergeFromWithOptimisticLock{})); !wasmrec.IsConflict(err) {
		t.Fatalf("a patch locked to a stale resourceVersion: %v, want a conflict", err)
	}

	d.Status.ReadyReplicas = 3
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: metav1.Unix(1700000000, 0)}}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	var read appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &read); err != nil {
		t.Fatal(err)
	}
	if read.Status.ReadyReplicas != 3 || len(read.Status.Conditions) != 1 || !read.Status.Conditions[0].LastUpdateTime.Equal(&d.Status.Conditions[0].LastUpdateTime) {
		t.Fatalf("status read back: %+v", read.Status)
	}

	if err := c.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground), client.UIDPrecondition("other")); err == nil {
		t.Fatal("a delete with another uid's precondition succeeded")
	}
	if err := c.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if _, ok := cluster.Get("apps/v1", "Deployment", "demo", "web"); ok {
		t.Fatal("the Deployment is still there")
	}
}

func TestApplyAndDeleteAllOf(t *testing.T) {
	cluster := fake.NewCluster(manifest,
		configMap("a", map[string]string{"app": "web"}, nil),
		configMap("b", map[string]string{"app": "web"}, nil),
		configMap("c", map[string]string{"app": "db"}, nil))
	c := client.From(cluster.Client())
	ctx := context.Background()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "applied"}, Data: map[string]string{"x": "1"}}
	if err := c.Patch(ctx, cm, client.Apply, client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if cm.UID == "" || cm.Data["x"] != "1" {
		t.Fatalf("applied %+v", cm)
	}
	if err := c.Event(ctx, cm, "Normal", "Applied", "applied by the test"); err != nil {
		t.Fatal(err)
	}
	if ev := cluster.Events(); len(ev) != 1 || ev[0].Reason != "Applied" {
		t.Fatalf("events %+v, want one Applied", ev)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("demo"), client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	var left corev1.ConfigMapList
	if err := c.List(ctx, &left, client.InNamespace("demo")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range left.Items {
		names = append(names, it.Name)
	}
	if len(names) != 2 || names[0] != "applied" || names[1] != "c" {
		t.Fatalf("left %v, want [applied c]", names)
	}
}

func TestFromTypedSeedsTheFakeCluster(t *testing.T) {
	replicas := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: metav1.Unix(1700000000, 0)}, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
	o, err := wasmrec.FromTyped(d)
	if err != nil {
		t.Fatal(err)
	}
	if o.APIVersion() != "apps/v1" || o.Kind() != "Deployment" {
		t.Fatalf("FromTyped gave %s %s", o.APIVersion(), o.Kind())
	}
	if ts, _ := o.NestedString("metadata", "creationTimestamp"); ts != "2023-11-14T22:13:20Z" {
		t.Fatalf("creationTimestamp %q", ts)
	}
	cluster := fake.NewCluster(manifest, o)
	var back appsv1.Deployment
	if err := client.From(cluster.Client()).Get(context.Background(), client.ObjectKeyFromObject(d), &back); err != nil {
		t.Fatal(err)
	}
	if *back.Spec.Replicas != 1 {
		t.Fatalf("read back %+v", back.Spec)
	}
	var into appsv1.Deployment
	if err := o.Into(&into); err != nil || into.CreationTimestamp.Unix() != 1700000000 {
		t.Fatalf("Into: %v, %v", err, into.CreationTimestamp)
	}
}

func TestListMatchingFieldsUsesTheIndexesRegistered(t *testing.T) {
	owned := func(name, owner string) *wasmrec.Object {
		o := configMap(name, nil, nil)
		yes := true
		_ = o.SetNested([]any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": "u-" + owner, "controller": yes}}, "metadata", "ownerReferences")
		return o
	}
	cluster := fake.NewCluster(manifest, owned("a", "web"), owned("b", "db"), owned("c", "web"), configMap("d", nil, nil))
	c := client.From(cluster.Client())
	ctx := context.Background()

	var list corev1.ConfigMapList
	err := c.List(ctx, &list, client.MatchingFields{".metadata.controller": "web"})
	if err == nil || !strings.Contains(err.Error(), `no index of it; register one with Client.IndexField`) {
		t.Fatalf("a field without an index: %v", err)
	}
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, ".metadata.controller", func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &list, client.InNamespace("demo"), client.MatchingFields{".metadata.controller": "web"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "a" || list.Items[1].Name != "c" {
		t.Fatalf("listed %d items, want a and c", len(list.Items))
	}
	if err := c.List(ctx, &list, client.MatchingFields{"metadata.name": "d"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "d" {
		t.Fatalf("by name: %v, %d items", err, len(list.Items))
	}
	// A *ListOptions is an option too, as in controller-runtime.
	if err := c.List(ctx, &list, &client.ListOptions{Namespace: "demo", Fields: map[string]string{".metadata.controller": "db"}}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "b" {
		t.Fatalf("with a *ListOptions: %v, %d items", err, len(list.Items))
	}
}

// A List with an index evaluates it once per object version, as controller-runtime's cache
// does, and tells the host the values: a later List is handed only the items that match or
// changed, and an object that changed is evaluated again.
func TestListMatchingFieldsEvaluatesAnIndexOncePerVersion(t *testing.T) {
	owned := func(name, owner string) *wasmrec.Object {
		o := configMap(name, nil, nil)
		_ = o.SetNested([]any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": "u-" + owner, "controller": true}}, "metadata", "ownerReferences")
		return o
	}
	var objs []*wasmrec.Object
	for i := range 40 {
		owner := "db"
		if i%10 == 0 {
			owner = "web"
		}
		objs = append(objs, owned(fmt.Sprintf("cm-%02d", i), owner))
	}
	cluster := fake.NewCluster(manifest, objs...)
	s := &counting{to: cluster.Client()}
	c := client.From(wasmrec.NewClientWith(s))
	ctx := context.Background()
	evaluated := map[string]int{}
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "owner", func(o client.Object) []string {
		evaluated[o.GetName()]++
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		t.Helper()
		var l corev1.ConfigMapList
		if err := c.List(ctx, &l, client.InNamespace("demo"), client.MatchingFields{"owner": "web"}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range l.Items {
			names = append(names, cm.Name)
		}
		return names
	}
	want := []string{"cm-00", "cm-10", "cm-20", "cm-30"}
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("first list: %v, want %v", got, want)
	}
	if len(evaluated) != 40 || s.items != 40 {
		t.Fatalf("the first list was handed %d items and evaluated the index on %d; want 40 and 40", s.items, len(evaluated))
	}
	clear(evaluated)
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("second list: %v, want %v", got, want)
	}
	if len(evaluated) != 0 || s.items != 4 {
		t.Errorf("the second list was handed %d items and evaluated the index on %v; want the 4 that match, and none", s.items, evaluated)
	}
	// cm-01 changes owner: its new version is evaluated, and it is listed.
	cluster.Put(owned("cm-01", "web"))
	want = []string{"cm-00", "cm-01", "cm-10", "cm-20", "cm-30"}
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("after a change: %v, want %v", got, want)
	}
	if evaluated["cm-01"] != 1 || len(evaluated) != 1 || s.items != 5 {
		t.Errorf("after a change the list was handed %d items, and the index was evaluated on %v", s.items, evaluated)
	}
	// A host that forgot what it was told (or predates being told) hands every item back: the
	// plugin still lists what matches, and tells it again.
	forgetful := &counting{to: fake.NewCluster(manifest, objs...).Client(), forget: true}
	c = client.From(wasmrec.NewClientWith(forgetful))
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "owner", func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var l corev1.ConfigMapList
		if err := c.List(ctx, &l, client.InNamespace("demo"), client.MatchingFields{"owner": "web"}); err != nil || len(l.Items) != 4 || forgetful.items != 40 {
			t.Fatalf("from a host that forgets: %v, %d items of %d handed", err, len(l.Items), forgetful.items)
		}
	}
}

// counting is a transport to a fake cluster that counts the items of each list's answer; one
// that forgets drops what a list tells of index values, as a host that predates them.
type counting struct {
	to     *wasmrec.Client
	forget bool
	items  int // in the last list's answer
}

func (s *counting) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	if fn == abi.ImportList && s.forget {
		var r abi.ListRequest
		if err := json.Unmarshal(req, &r); err != nil {
			return abi.StatusBadRequest, []byte(err.Error())
		}
		r.Indexed = nil
		req, _ = json.Marshal(r)
	}
	resp, err := s.to.Raw(ctx, fn, req)
	if se := (*wasmrec.StatusError)(nil); errors.As(err, &se) {
		return se.Status, []byte(se.Message)
	}
	if fn == abi.ImportList {
		var l abi.ListResponse
		_ = json.Unmarshal(resp, &l)
		s.items = len(l.Items)
	}
	return abi.StatusOK, resp
}

func (s *counting) Log(level int32, line []byte) {}

// spy is a transport that keeps each request on its way to a fake cluster.
type spy struct {
	to       *wasmrec.Client
	requests []string
}

func (s *spy) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	s.requests = append(s.requests, fn+" "+string(req))
	resp, err := s.to.Raw(ctx, fn, req)
	if se := (*wasmrec.StatusError)(nil); errors.As(err, &se) {
		return se.Status, []byte(se.Message)
	}
	return abi.StatusOK, resp
}

func (s *spy) Log(level int32, line []byte) {}

func (s *spy) last() string { return s.requests[len(s.requests)-1] }

type bogusDryRun struct{}

func (bogusDryRun) ApplyToDelete(o *client.DeleteOptions) { o.DryRun = []string{"Bogus"} }

func TestWriteOptionsReachTheHostAndADryRunStoresNothing(t *testing.T) {
	cluster := fake.NewCluster(manifest, configMap("a", nil, map[string]string{"k": "v"}))
	s := &spy{to: cluster.Client()}
	c := client.From(wasmrec.NewClientWith(s))
	ctx := context.Background()
	stored := func(name string) *corev1.ConfigMap {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: name}, &cm); err != nil {
			return nil
		}
		return &cm
	}
	a := stored("a")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "b"}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm, client.DryRunAll, client.FieldOwner("spec")); err != nil {
		t.Fatal(err)
	}
	if want := `create {"object":{"kind":"ConfigMap",`; !strings.HasPrefix(s.last(), want) || !strings.HasSuffix(s.last(), `},"fieldOwner":"spec","dryRun":true}`) {
		t.Errorf("the request was %s", s.last())
	}
	if cm.UID == "" || cm.ResourceVersion != "" || stored("b") != nil {
		t.Errorf("a dry-run create answered %+v and stored %v; want an object with a uid and no resourceVersion, and nothing stored", cm.ObjectMeta, stored("b"))
	}

	up := a.DeepCopy()
	up.Data["k"] = "changed"
	if err := c.Update(ctx, up, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if up.Data["k"] != "changed" || up.ResourceVersion != a.ResourceVersion || stored("a").Data["k"] != "v" {
		t.Errorf("a dry-run update answered %v at %s, stored %v; want the change answered at %s and nothing stored", up.Data, up.ResourceVersion, stored("a").Data, a.ResourceVersion)
	}
	if err := c.Update(ctx, up, client.FieldOwner("spec")); err != nil || !strings.HasSuffix(s.last(), `,"fieldOwner":"spec"}`) || strings.Contains(s.last(), "dryRun") {
		t.Errorf("an update with a field owner: %v, request %s", err, s.last())
	}

	p := stored("a")
	patched := p.DeepCopy()
	patched.Data["k"] = "patched"
	if err := c.Patch(ctx, patched, client.MergeFrom(p), client.FieldOwner("patcher"), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.last(), `"fieldOwner":"patcher","dryRun":true}`) || stored("a").Data["k"] != "changed" || patched.Data["k"] != "patched" {
		t.Errorf("a dry-run patch: request %s, stored %v, answered %v", s.last(), stored("a").Data, patched.Data)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas = 3
	if err := c.Status().Patch(ctx, d, client.Apply, client.ForceOwnership, client.FieldOwner("status"), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.last(), `"subresource":"status","force":true,"fieldOwner":"status","dryRun":true}`) || d.Status.Replicas != 3 {
		t.Errorf("a dry-run status apply sent %s and answered %d replicas", s.last(), d.Status.Replicas)
	}
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, &got); err != nil || got.Status.Replicas != 0 {
		t.Errorf("after a dry-run status apply the Deployment has %d replicas (%v), want 0", got.Status.Replicas, err)
	}

	if err := c.Delete(ctx, p, client.DryRunAll); err != nil || !strings.HasSuffix(s.last(), `,"dryRun":true}`) || stored("a") == nil {
		t.Errorf("a dry-run delete: %v, request %s, still stored: %v", err, s.last(), stored("a") != nil)
	}
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("demo"), client.DryRunAll); err != nil || stored("a") == nil {
		t.Errorf("a dry-run deleteAllOf: %v, still stored: %v", err, stored("a") != nil)
	}

	n := len(s.requests)
	if err := c.Delete(ctx, p, bogusDryRun{}); err == nil || !strings.Contains(err.Error(), `dryRun "Bogus": the API server takes only "All"`) || len(s.requests) != n {
		t.Errorf("a dryRun the API server does not take: %v, %d requests sent", err, len(s.requests)-n)
	}
	err := c.Update(ctx, up, client.FieldOwner("two\nlines"))
	if se := (*wasmrec.StatusError)(nil); !errors.As(err, &se) || se.Status != abi.StatusBadRequest || !strings.Contains(err.Error(), "use printable characters only") {
		t.Errorf("an owner with a new line: %v, want bad request", err)
	}
}

// TestStrategicMergeFromKeepsWhatOthersAdded patches a Deployment's containers, env and
// finalizers from a copy read before another writer added a container: the patch says only
// what this plugin changed, by key, so the other writer's container stays, where MergeFrom's
// patch would have replaced the list with the plugin's.
func TestStrategicMergeFromKeepsWhatOthersAdded(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", Finalizers: []string{"a.example/x", "b.example/y"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "web", Image: "nginx:1", Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}},
				{Name: "log", Image: "busybox"},
			}}},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}

	// Another writer adds a container after the plugin read the Deployment.
	var other appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &other); err != nil {
		t.Fatal(err)
	}
	other.Spec.Template.Spec.Containers = append(other.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy"})
	if err := c.Update(ctx, &other); err != nil {
		t.Fatal(err)
	}

	orig := d.DeepCopy()
	web := &d.Spec.Template.Spec.Containers[0]
	web.Image = "nginx:2"
	web.Env = web.Env[1:]                                                 // A goes
	d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1] // log goes
	d.Finalizers = []string{"b.example/y"}
	patch := client.StrategicMergeFrom(orig)
	data, err := patch.Data(d)
	if err != nil {
		t.Fatal(err)
	}
	// What Kubernetes' strategicpatch.CreateTwoWayMergePatch makes of the same two objects.
	want := `{"metadata":{"$deleteFromPrimitiveList/finalizers":["a.example/x"],"$setElementOrder/finalizers":["b.example/y"]},` +
		`"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[` +
		`{"$setElementOrder/env":[{"name":"B"}],"env":[{"$patch":"delete","name":"A"}],"image":"nginx:2","name":"web"},` +
		`{"$patch":"delete","name":"log"}]}}}}`
	if !sameJSON(t, data, []byte(want)) {
		t.Fatalf("patch\n %s\nwant\n %s", data, want)
	}
	if patch.Type() != abi.PatchStrategic {
		t.Fatalf("type %q", patch.Type())
	}
	if err := c.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ctr := range d.Spec.Template.Spec.Containers {
		names = append(names, ctr.Name+"="+ctr.Image)
	}
	if got := strings.Join(names, " "); got != "web=nginx:2 sidecar=envoy" {
		t.Fatalf("containers after the patch: %s, want web=nginx:2 sidecar=envoy", got)
	}
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Name != "B" {
		t.Fatalf("env after the patch: %+v", env)
	}
	if !slices.Equal(d.Finalizers, []string{"b.example/y"}) {
		t.Fatalf("finalizers after the patch: %v", d.Finalizers)
	}

	// Unchanged, the patch is empty; locked, it carries the resourceVersion read.
	same, err := client.StrategicMergeFrom(d.DeepCopy(), client.MergeFromWithOptimisticLock{}).Data(d)
	if err != nil || !sameJSON(t, same, []byte(`{"metadata":{"resourceVersion":"`+d.ResourceVersion+`"}}`)) {
		t.Fatalf("an unchanged object's locked patch: %s (%v)", same, err)
	}
}

func TestStrategicMergeFromSaysWhatItCannotPatch(t *testing.T) {
	// A type without patch metadata, as a plugin's own CRD types are.
	_, err := client.StrategicMergeFrom(noMeta{&corev1.ConfigMap{}}).Data(noMeta{&corev1.ConfigMap{}})
	if err == nil || !strings.Contains(err.Error(), "use MergeFrom") {
		t.Fatalf("StrategicMergeFrom of a type without patch metadata: %v", err)
	}
}

// noMeta is an object whose type has no PatchField.
type noMeta struct{ client.Object }

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// A container the plugin adds goes after the containers it knew of, and one another writer
// added meanwhile after it, as the API server orders them (app, sidecar, logger).
func TestStrategicMergeFromOrdersAsTheAPIServer(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var other appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &other); err != nil {
		t.Fatal(err)
	}
	other.Spec.Template.Spec.Containers = append(other.Spec.Template.Spec.Containers, corev1.Container{Name: "logger", Image: "fluent"})
	if err := c.Update(ctx, &other); err != nil {
		t.Fatal(err)
	}
	orig := d.DeepCopy()
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	if err := c.Patch(ctx, d, client.StrategicMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ctr := range d.Spec.Template.Spec.Containers {
		names = append(names, ctr.Name)
	}
	if got := strings.Join(names, " "); got != "app sidecar logger" {
		t.Fatalf("containers %s, want app sidecar logger", got)
	}
}
