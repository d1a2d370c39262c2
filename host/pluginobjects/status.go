package pluginobjects

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// notLoaded reports an object whose plugin is not loaded: once per distinct failure in the log
// and an Event, and always in status. The supervisor tries again on its own.
func (r *resources) notLoaded(ctx context.Context, u *unstructured.Unstructured, l *objectRun, st plugin.State) error {
	if st.Reason == "" { // the first attempt has not ended
		return r.status(ctx, u, nil, &failure{reason: "Loading", msg: "the module is being loaded", refusals: l.serving().refusals})
	}
	first := st.Err
	var before *plugin.RefusedBeforeError
	if errors.As(first, &before) {
		first = before.Err
	}
	f, news := l.notLoaded(st.Reason, first.Error())
	switch cfg := l.sup.Config(); {
	case st.Reason == plugin.ReasonRevoked:
		f.msg = fmt.Sprintf("%s (looked at again every %s)", f.msg, st.Next.Round(time.Second))
	case st.Next > 0 && isRegistry(&cfg):
		f.msg = fmt.Sprintf("%s (tried again in %s)", f.msg, st.Next.Round(time.Second))
	case st.Next > 0:
		f.msg = fmt.Sprintf("%s (tried again in %s, or as soon as the module file changes)", f.msg, st.Next.Round(time.Second))
	}
	if news {
		r.event(u, corev1.EventTypeWarning, st.Reason, "%v", st.Err)
	}
	return r.status(ctx, u, nil, &f)
}

func isRegistry(cfg *plugin.Config) bool {
	_, ok := cfg.OCIRef()
	return ok
}

// status writes the object's status: Ready while a module serves, Degraded while the last
// attempt (load or swap) failed, with its message, and Running while the controller runs. The
// conditions are metav1.Conditions, set with apimachinery's helpers: a condition's
// lastTransitionTime moves only when its status does. A failed write is returned, so that the
// reconcile is retried with backoff.
func (r *resources) status(ctx context.Context, u *unstructured.Unstructured, l *objectRun, f *failure) error {
	var s *serving
	if l != nil {
		p := l.sup.State().Plugin
		if p == nil {
			return nil // stopped meanwhile: the next reconcile says so
		}
		sv := l.serving()
		s = &sv
		s.digest, s.running, s.kinds, s.plugin, s.unavailable = p.Module().Digest(), p.Running(), p.Kinds(), p, p.Unavailable()
		s.failing, s.waiting, s.indexRefused = p.Failing(), p.Waiting(), p.IndexRefused()
		s.rollout = p.Rollout()
	}
	st := map[string]any{}
	if r.leading() {
		st = statusOf(u, s, f, r.host.Share() != nil)
	}
	if t := r.host.Share(); t != nil {
		st["replicas"] = replicasOf(u, t.Identity(), t.Replicas(), s)
	}
	if len(st) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": st})
	gvr := ClusterGVR
	if u.GetNamespace() != "" {
		gvr = GVR
	}
	_, err := r.dynamic.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing %s's status: %w", describe(u), err)
	}
	return nil
}

// ReasonIndexOverBudget is Degraded's reason, and an Event's, while the memory budget has no
// room for the values of the serving version's field indexes (plugin.Plugin.IndexRefused).
const ReasonIndexOverBudget = "IndexOverBudget"

// serving is what a Plugin's status says of its loaded plugin.
type serving struct {
	digest          string
	swaps, refusals int64
	lastErr         string    // the last swap's refusal, or fetch failure; "" once one succeeds
	lastWhy         string    // its reason: SwapRefused, FetchFailed or OverBudget
	next            time.Time // when a move that failed for FetchFailed or OverBudget is tried again
	running         bool
	kinds           []schema.GroupVersionKind
	plugin          *plugin.Plugin
	unavailable     []string // what it needs that the host cannot list or watch
	failing         string   // Plugin.Failing: every reconcile fails
	indexRefused    string   // Plugin.IndexRefused: the budget has no room for its field index
	waiting         []string // Plugin.Waiting: kinds it needs that no API serves
	rollout         *plugin.RolloutStatus
}

// statusOf is the status (a merge patch) of Plugin u, whose plugin s serves (nil: not loaded,
// for f).
// With shared set, replicas share the plugin: whether it runs is said per replica.
func statusOf(u *unstructured.Unstructured, s *serving, f *failure, shared bool) map[string]any {
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &conds) // conditions the host did not write are replaced
	}
	set := func(typ string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: u.GetGeneration()})
	}
	st := map[string]any{"observedGeneration": u.GetGeneration()}
	lastErr, why := "", "LoadFailed"
	if f != nil {
		lastErr, why = f.msg, f.reason
		if f.refusals > 0 {
			st["refusals"] = f.refusals
		}
	}
	if s != nil {
		lastErr, why = s.lastErr, cmp.Or(s.lastWhy, "SwapRefused")
		if (why == plugin.ReasonFetchFailed || why == plugin.ReasonOverBudget) && lastErr != "" {
			lastErr = fmt.Sprintf("%s (the module serving serves on; spec.module is tried again in %s)", lastErr, max(time.Until(s.next), 0).Round(time.Second))
		}
		st["swaps"], st["refusals"], st["activeDigest"] = s.swaps, s.refusals, s.digest
		st["rollout"] = rolloutOf(s.rollout)
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	switch {
	case paused:
		set("Ready", false, "Paused", "spec.paused is set")
	case s == nil:
		set("Ready", false, "NotLoaded", lastErr)
	case len(s.waiting) > 0:
		// Its controller cannot start, whichever replica leads: no CRD serves a kind it needs.
		set("Ready", false, "WaitingForKinds", "waiting until these are served: "+strings.Join(s.waiting, "; "))
	case lastErr != "":
		set("Ready", true, "Serving", "the last good module serves")
	default:
		set("Ready", true, "Serving", "the module serves")
	}
	switch {
	case paused:
		set("Degraded", false, "Paused", "")
	case s == nil || lastErr != "":
		set("Degraded", true, why, lastErr)
	case len(s.unavailable) > 0:
		set("Degraded", true, "Unavailable", strings.Join(s.unavailable, "; "))
	case s.failing != "":
		set("Degraded", true, "ReconcilesFailing", s.failing)
	case s.indexRefused != "":
		set("Degraded", true, ReasonIndexOverBudget, s.indexRefused)
	default:
		set("Degraded", false, "Healthy", "")
	}
	switch {
	case s == nil || shared:
		meta.RemoveStatusCondition(&conds, "Running")
	case s.running:
		set("Running", true, "Reconciling", "the controller runs")
	default:
		set("Running", false, "Waiting", fmt.Sprintf("not running: it waits for %s to be served (their CRDs installed) and for this replica to lead", kinds.GVKs(s.kinds)))
	}
	st["conditions"] = conds
	st["lastError"] = nil // a merge patch: null removes it
	if lastErr != "" {
		st["lastError"] = lastErr
	}
	return st
}

// rolloutOf is the merge patch of status.rollout: ro whole, the fields it leaves out null.
func rolloutOf(ro *plugin.RolloutStatus) any {
	if ro == nil {
		return nil
	}
	b, _ := json.Marshal(ro)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"ended", "differences"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return m
}

// replicasOf is the merge patch of status.replicas from replica me: its own entry (what it
// holds of the plugin and whether it runs it), and null for the entries of replicas no longer
// live, which are gone for good (a restarted process is a new replica).
func replicasOf(u *unstructured.Unstructured, me string, live []string, s *serving) map[string]any {
	out := map[string]any{}
	old, _, _ := unstructured.NestedMap(u.Object, "status", "replicas")
	for id := range old {
		if !slices.Contains(live, id) {
			out[id] = nil
		}
	}
	entry := map[string]any{"holds": []string{}, "running": false}
	if s != nil {
		if held := s.plugin.Held(); held != nil {
			entry["holds"] = held
		}
		entry["running"] = s.running
	}
	out[me] = entry
	return out
}
