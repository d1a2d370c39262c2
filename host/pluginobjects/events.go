package pluginobjects

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

// onSwap records a swap's outcome on the object, whoever triggered it.
func (r *resources) onSwap(u *unstructured.Unstructured, l *objectRun) func(plugin.SwapEvent) {
	again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
	return func(s plugin.SwapEvent) {
		l.swapped(s)
		switch {
		case s.Unchanged:
		case s.Err != nil && s.NotNow:
			r.event(u, corev1.EventTypeWarning, "SwapWaiting", "%s keeps serving, and the new module is tried again: %v", s.From, s.Err)
		case s.Err != nil:
			r.event(u, corev1.EventTypeWarning, "SwapRefused", "%s keeps serving: %v", s.From, s.Err)
		case s.Rollback:
			r.event(u, corev1.EventTypeNormal, "RolledBack", "%s -> %s, a version that served before (kept compiled)", s.From, s.To)
		default:
			r.event(u, corev1.EventTypeNormal, "Swapped", "%s -> %s", s.From, s.To)
		}
		r.ctrl.Enqueue(again)
	}
}

// RolloutAnnotation on a plugin object is an operator's word on the rollout of a new module
// version: "promote DIGEST" (the candidate serves every key now) or "abort DIGEST" (it is
// dropped, and not tried again until the plugin's source changes). It acts only while the
// rollout of that digest runs, on every replica, and may stay on the object.
const RolloutAnnotation = "wasmrec.dev/rollout"

// rolloutAction acts on u's rollout annotation, if it names p's candidate.
func (r *resources) rolloutAction(u *unstructured.Unstructured, p *plugin.Plugin) {
	word, digest, _ := strings.Cut(u.GetAnnotations()[RolloutAnnotation], " ")
	st := p.Rollout()
	if digest == "" || st == nil || !st.Active() || st.Candidate != strings.TrimSpace(digest) {
		return
	}
	switch word {
	case "promote":
		p.Promote()
	case "abort":
		p.Abort(fmt.Sprintf("aborted by an operator (annotation %s) at the %s step", RolloutAnnotation, st.Step))
	default:
		r.event(u, corev1.EventTypeWarning, "BadRolloutAnnotation", "annotation %s: %q: write \"promote %s\" or \"abort %s\"", RolloutAnnotation, word, st.Candidate, st.Candidate)
	}
}

// onRollout records a rollout's news on the object as Events, and has its status written.
// A version rolled back or aborted makes the object Degraded, as a refused swap does, until a
// version is taken.
func (r *resources) onRollout(u *unstructured.Unstructured, l *objectRun) func(plugin.RolloutEvent) {
	again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
	return func(e plugin.RolloutEvent) {
		st := e.Status
		typ, msg := corev1.EventTypeNormal, ""
		switch e.Reason {
		case "RolloutStarted":
			msg = fmt.Sprintf("%s comes in beside %s: %s step", st.Candidate, st.Live, st.Step)
		case "RolloutStep":
			msg = fmt.Sprintf("%s: %s; now the %s step", st.Candidate, st.Message, st.Step)
		case "RolloutRolledBack":
			typ = corev1.EventTypeWarning
			msg = fmt.Sprintf("%s rolled back at the %s step, %s serving on: %s", st.Candidate, st.Step, st.Live, st.Message)
		default: // promoted, aborted
			msg = fmt.Sprintf("%s: %s", st.Candidate, st.Message)
		}
		if e.Dropped { // spec.module's version does not serve: Degraded until one is taken
			l.failed(fmt.Sprintf("%s (%s) does not serve: %s; %s serves", st.Candidate, strings.ToLower(st.Stage), st.Message, st.Live), st.Stage)
		}
		r.event(u, typ, e.Reason, "%s", msg)
		r.ctrl.Enqueue(again)
	}
}

func (r *resources) refuse(ctx context.Context, u *unstructured.Unstructured, reason string, err error) error {
	if r.leading() { // once, by the replica that reports
		r.log.Error(err, "plugin object refused", "object", describe(u), "reason", reason)
	}
	r.event(u, corev1.EventTypeWarning, reason, "%v", err)
	return r.status(ctx, u, nil, &failure{reason: reason, msg: err.Error()})
}

// leading is whether this replica leads: only the leader writes status and Events, so that
// replicas loading the same plugins do not report everything twice.
//
// Replicas that share plugins (Host.Share) all run: one of them, the group's reporter, writes
// the status and Events they would all write alike, and each writes its own entry of
// status.replicas.
func (r *resources) leading() bool {
	if t := r.host.Share(); t != nil {
		return t.Reporter()
	}
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

func (r *resources) event(u *unstructured.Unstructured, typ, reason, format string, args ...any) {
	if r.leading() {
		r.recorder.Eventf(u, typ, reason, format, args...)
	}
}
