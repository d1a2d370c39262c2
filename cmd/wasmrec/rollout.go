package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

func newRolloutCommand(stdout io.Writer) *cobra.Command {
	kube := genericclioptions.NewConfigFlags(true)
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "rollout (status|promote|abort) (NAME | plugin/NAME | clusterplugin/NAME)",
		Short: "Show, promote or abort the rollout of a plugin object's new module version",
		Long: `rollout acts on the rollout of a new module version of a Plugin (in the namespace -n names, or
the kubeconfig's) or a ClusterPlugin, as its spec.rollout runs it: a shadow run, then canary
shares of keys, each step judged against the live version.

  status   prints the stage, both versions' digests and figures, and what the step waits for.
  promote  makes the new version serve every key now, whatever its figures.
  abort    drops the new version, the live one serving on; it is not tried again until the
           plugin's module changes.

promote and abort write the annotation wasmrec.dev/rollout ("promote DIGEST", "abort DIGEST"),
which the host acts on while the rollout of that digest runs, then wait for the status to say
the rollout ended. Who may update the object may do either.`,
		Example: `  wasmrec rollout status hash -n team-a
  wasmrec rollout promote clusterplugin/hash
  wasmrec rollout abort plugin/hash -n team-a`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			verb := args[0]
			if verb != "status" && verb != "promote" && verb != "abort" {
				return fmt.Errorf("%q: say status, promote or abort", verb)
			}
			gvr, namespace, name, err := rolloutTarget(kube, args[1])
			if err != nil {
				return err
			}
			cfg, err := kube.ToRESTConfig()
			if err != nil {
				return err
			}
			d, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			objs := d.Resource(gvr).Namespace(namespace)
			ctx := cmd.Context()
			u, err := objs.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && gvr == pluginobjects.GVR {
				if _, cerr := d.Resource(pluginobjects.ClusterGVR).Get(ctx, name, metav1.GetOptions{}); cerr == nil {
					return fmt.Errorf("no Plugin %s/%s, but a ClusterPlugin %s: say clusterplugin/%s", namespace, name, name, name)
				}
			}
			if err != nil {
				return err
			}
			what := describeObject(u)
			ro, err := rolloutStatusOf(u)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if verb == "status" {
				printRollout(stdout, what, ro)
				return nil
			}
			if ro == nil || !ro.Active() {
				last := "none since its plugin loaded"
				if ro != nil {
					last = fmt.Sprintf("the last one, of %s, ended %s: %s", ro.Candidate, strings.ToLower(ro.Stage), ro.Message)
				}
				return fmt.Errorf("%s has no rollout running (%s)", what, last)
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{pluginobjects.RolloutAnnotation: verb + " " + ro.Candidate}}})
			if _, err := objs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: asked the host to %s %s\n", what, verb, ro.Candidate)
			return waitForRolloutEnd(ctx, stdout, objs, name, what, ro.Candidate, wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long promote and abort wait for the status to say the rollout ended (0: do not wait)")
	kube.AddFlags(cmd.Flags())
	return cmd
}

// rolloutTarget resolves NAME, plugin/NAME or clusterplugin/NAME.
func rolloutTarget(kube *genericclioptions.ConfigFlags, arg string) (schema.GroupVersionResource, string, string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "plugin", arg
	}
	switch strings.ToLower(kind) {
	case "plugin", "plugins", "pl":
		ns, _, err := kube.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return schema.GroupVersionResource{}, "", "", err
		}
		return pluginobjects.GVR, ns, name, nil
	case "clusterplugin", "clusterplugins", "cpl":
		return pluginobjects.ClusterGVR, "", name, nil
	}
	return schema.GroupVersionResource{}, "", "", fmt.Errorf("%q: name a Plugin (NAME or plugin/NAME, with -n) or a ClusterPlugin (clusterplugin/NAME)", arg)
}

func describeObject(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return fmt.Sprintf("Plugin %s/%s", u.GetNamespace(), u.GetName())
	}
	return "ClusterPlugin " + u.GetName()
}

func rolloutStatusOf(u *unstructured.Unstructured) (*plugin.RolloutStatus, error) {
	raw, ok, _ := unstructured.NestedMap(u.Object, "status", "rollout")
	if !ok || raw == nil {
		return nil, nil
	}
	b, _ := json.Marshal(raw)
	var ro plugin.RolloutStatus
	if err := json.Unmarshal(b, &ro); err != nil {
		return nil, fmt.Errorf("status.rollout is not a rollout the host wrote: %v", err)
	}
	return &ro, nil
}

func printRollout(w io.Writer, what string, ro *plugin.RolloutStatus) {
	if ro == nil {
		fmt.Fprintf(w, "%s: no rollout since its plugin loaded\n", what)
		return
	}
	stage := ro.Stage
	if ro.Active() {
		stage += fmt.Sprintf(", %s step for %s", ro.Step, time.Since(ro.StepStarted.Time).Round(time.Second))
	} else {
		stage += fmt.Sprintf(" at the %s step, %s ago", ro.Step, time.Since(ro.Ended.Time).Round(time.Second))
	}
	fmt.Fprintf(w, "%s: %s\n", what, stage)
	live, cand := "live     ", "candidate"
	if !ro.Active() { // the figures are those of the step it ended at
		live, cand = "old      ", "new      "
	}
	fmt.Fprintf(w, "  %s  %s: %s\n", live, ro.Live, ro.LiveFigures)
	fmt.Fprintf(w, "  %s  %s: %s\n", cand, ro.Candidate, ro.CandidateFigures)
	if d := ro.Differences; d != nil {
		fmt.Fprintf(w, "  shadow     %d reconciles compared: %d wrote differently, %d returned differently, %d not shadowed (every shadow instance busy)\n",
			d.Compared, d.Writes, d.Results, d.Skipped)
	}
	fmt.Fprintf(w, "  %s\n", ro.Message)
}

// waitForRolloutEnd waits until the status says the rollout of candidate ended, and prints how.
func waitForRolloutEnd(ctx context.Context, w io.Writer, objs dynamic.ResourceInterface, name, what, candidate string, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		u, err := objs.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return err
		}
		if err == nil {
			if ro, _ := rolloutStatusOf(u); ro != nil && ro.Candidate == candidate && !ro.Active() {
				printRollout(w, what, ro)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New(what + ": the status does not say the rollout ended yet: is the host running? `wasmrec rollout status` shows where it is")
		case <-time.After(250 * time.Millisecond):
		}
	}
}
