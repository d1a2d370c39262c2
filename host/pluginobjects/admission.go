package pluginobjects

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/crd"
)

// AdmissionPolicy is the ValidatingAdmissionPolicy that admits a Plugin or ClusterPlugin, or a
// change of what it runs or may do, only from a requester who could do all it grants, and its
// two bindings: one refuses, the other warns of each right the requester lacks. Its comments
// say how, and why each right has a validation of its own.
//
//go:embed admission.yaml
var AdmissionPolicy []byte

// ParseAdmissionPolicy returns the policy and the bindings AdmissionPolicy holds.
func ParseAdmissionPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	var (
		policy   *admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(AdmissionPolicy), 4096)
	for i := 1; ; i++ {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, fmt.Errorf("admission.yaml: document %d: %w", i, err)
		}
		if len(doc) == 0 {
			continue
		}
		var into runtime.Object
		switch kind := fmt.Sprint(doc["apiVersion"], " ", doc["kind"]); kind {
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			if policy != nil {
				return nil, nil, fmt.Errorf("admission.yaml: document %d: a second ValidatingAdmissionPolicy", i)
			}
			policy = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			into = policy
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			bindings = append(bindings, b)
			into = b
		default:
			return nil, nil, fmt.Errorf("admission.yaml: document %d is a %s, not a ValidatingAdmissionPolicy or its binding", i, kind)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(doc, into, true); err != nil {
			return nil, nil, fmt.Errorf("admission.yaml: document %d: %w", i, err)
		}
	}
	if policy == nil || len(bindings) == 0 {
		return nil, nil, errors.New("admission.yaml: holds no ValidatingAdmissionPolicy, or no binding of it")
	}
	return policy, bindings, nil
}

// Install installs on the cluster cfg reaches what Plugin and ClusterPlugin objects need: the
// admission policy first, so that no Plugin is ever admitted without it, then the two CRDs. It
// creates each object, or updates the one there, and waits until the CRDs are established.
// The API server enforces the policy once its informers see it, within moments.
func Install(ctx context.Context, cfg *rest.Config) error {
	policy, bindings, err := ParseAdmissionPolicy()
	if err != nil {
		return err
	}
	crds, err := crd.Parse(CRD)
	if err != nil {
		return fmt.Errorf("plugins.crd.yaml: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	remedy := "the API server must serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies (Kubernetes 1.30 or later), and the installer needs create, get and update on them and their bindings"
	policies := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if err := createOrUpdate(ctx, policy, policies.Create, policies.Get, policies.Update,
		func(got, want *admissionregistrationv1.ValidatingAdmissionPolicy) { got.Spec = want.Spec }); err != nil {
		return fmt.Errorf("installing ValidatingAdmissionPolicy %s on %s: %w: %s", policy.Name, cfg.Host, err, remedy)
	}
	client := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	for _, b := range bindings {
		if err := createOrUpdate(ctx, b, client.Create, client.Get, client.Update,
			func(got, want *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { got.Spec = want.Spec }); err != nil {
			return fmt.Errorf("installing ValidatingAdmissionPolicyBinding %s on %s: %w: %s", b.Name, cfg.Host, err, remedy)
		}
	}
	err = crd.Install(ctx, cfg, crds, 0)
	if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "spec.scope") {
		return fmt.Errorf("%w: the plugins.wasmrec.dev CRD installed is the cluster-scoped one of before: delete it (kubectl delete crd plugins.wasmrec.dev; its Plugin objects go with it), install again, and make them again as Plugins of namespaces or as ClusterPlugins", err)
	}
	return err
}

// createOrUpdate creates want, or, if it exists, sets what it says (its spec, labels and
// annotations) on the object there.
func createOrUpdate[T interface {
	metav1.Object
	runtime.Object
}](
	ctx context.Context, want T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	setSpec func(got, want T),
) error {
	_, err := create(ctx, want.DeepCopyObject().(T), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	got, err := get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	setSpec(got, want)
	got.SetLabels(want.GetLabels())
	got.SetAnnotations(want.GetAnnotations())
	_, err = update(ctx, got, metav1.UpdateOptions{})
	return err
}
