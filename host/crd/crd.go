package crd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// DefaultTimeout is how long Install waits for CRDs to be established when given no timeout.
const DefaultTimeout = 30 * time.Second

// Read parses the CRDs in the given files and directories (every .yaml, .yml and .json file in
// a directory, not recursively). Multi-document YAML is read whole; other kinds are an error.
func Read(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("crd: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("crd: %w", err)
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("crd: %w", err)
		}
		got, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("crd: %s: %w", f, err)
		}
		crds = append(crds, got...)
	}
	return crds, nil
}

// Parse reads the CRDs in one YAML or JSON stream.
func Parse(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 1; ; i++ {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := dec.Decode(&crd); err != nil {
			if errors.Is(err, io.EOF) {
				return crds, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if crd.Kind == "" && crd.Name == "" {
			continue // an empty document
		}
		if crd.Kind != "CustomResourceDefinition" || crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("document %d (%q) is a %s %s, not an %s CustomResourceDefinition",
				i, crd.Name, crd.APIVersion, crd.Kind, apiextensionsv1.SchemeGroupVersion)
		}
		crds = append(crds, &crd)
	}
}

// Install creates the CRDs (or updates those that exist) and waits, at most timeout (0 for
// DefaultTimeout), until each is established.
func Install(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crd: client for %s: %w", cfg.Host, err)
	}
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		want := crd.DeepCopy()
		_, err := client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = updateSpec(ctx, cs, want)
		}
		if err != nil {
			return fmt.Errorf("crd: installing %s on %s: %w", crd.Name, cfg.Host, err)
		}
		names = append(names, crd.Name)
	}
	return WaitEstablished(ctx, cs, names, timeout)
}

func updateSpec(ctx context.Context, cs apiextensionsclient.Interface, want *apiextensionsv1.CustomResourceDefinition) error {
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	got, err := client.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec = want.Spec
	got.Labels, got.Annotations = want.Labels, want.Annotations
	_, err = client.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// WaitEstablished waits until every named CRD has condition Established=True. On timeout it
// names each CRD still waiting and the conditions that say why.
func WaitEstablished(ctx context.Context, cs apiextensionsclient.Interface, names []string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	pending := slices.Clone(names)
	why := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, name := range pending {
			crd, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				// A condition seen earlier says more than a failed poll (often the poll's own
				// deadline or client rate limit running out).
				if _, known := why[name]; !known {
					why[name] = err.Error()
				}
				still = append(still, name)
				continue
			}
			if ok, reason := established(crd); !ok {
				why[name] = reason
				still = append(still, name)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err == nil {
		return nil
	}
	var msgs []string
	for _, name := range pending {
		msgs = append(msgs, fmt.Sprintf("%s (%s)", name, why[name]))
	}
	return fmt.Errorf("crd: not established after %s: %s: fix the CRD (names must not clash with another CRD's) and apply it again", timeout, strings.Join(msgs, "; "))
}

func established(crd *apiextensionsv1.CustomResourceDefinition) (bool, string) {
	var conds []string
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true, ""
		}
		s := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			s += " " + c.Reason
		}
		if c.Message != "" {
			s += ": " + c.Message
		}
		conds = append(conds, s)
	}
	if len(conds) == 0 {
		return false, "no conditions yet"
	}
	return false, strings.Join(conds, ", ")
}

// Uninstall deletes the named CRDs and waits, at most timeout (0 for DefaultTimeout), until
// they are gone (their objects are deleted with them).
func Uninstall(ctx context.Context, cfg *rest.Config, names []string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crd: client for %s: %w", cfg.Host, err)
	}
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range names {
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("crd: deleting %s: %w", name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, err := client.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("crd: %v still present after %s", names, timeout)
	}
	return nil
}
