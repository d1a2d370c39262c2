package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/signature/signaturetest"
)

// cli runs bin/wasmrec as a user would, and returns what it printed.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := filepath.Abs("../bin/wasmrec")
	must(t, err)
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cli(t, args...)
	if err != nil {
		t.Fatalf("wasmrec %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// A host config plugin whose modules must be signed by a team's key: a module pushed and
// signed with the CLI loads; a tag moved to an unsigned module, and then to one signed by
// another key, is refused before it is compiled while the old version serves, and the refusal
// names the key found and the key wanted; once the team signs it, it swaps in. A module file
// is checked by the bundle beside it.
func TestSignedModulesWithAKey(t *testing.T) {
	reg := startRegistry(t)
	installThings(t)
	ns := namespace(t)
	ctx := context.Background()
	dir := t.TempDir()
	keys := func(name string) (private, public, fingerprint string) {
		out := mustCLI(t, "keygen", filepath.Join(dir, name))
		_, fp, _ := strings.Cut(out, "(key ")
		fp, _, _ = strings.Cut(fp, ")")
		return filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub"), fp
	}
	teamKey, teamPub, teamFP := keys("team")
	otherKey, _, otherFP := keys("other")
	ociFlags := []string{"--insecure", reg.addr, "--oci-cache", t.TempDir()}
	ref := reg.addr + "/plugins/signed:live"
	out := mustCLI(t, append([]string{"push", wasmFile(t, "testguests", "swap-v1"), ref, "--sign", "--key", teamKey}, ociFlags...)...)
	if !strings.Contains(out, "signed with key "+teamFP) {
		t.Fatalf("wasmrec push --sign printed:\n%s", out)
	}
	if out := mustCLI(t, append([]string{"verify", ref, "--key", teamPub}, ociFlags...)...); !strings.Contains(out, "signed by key "+teamFP) {
		t.Fatalf("wasmrec verify printed:\n%s", out)
	}

	// A module file, unsigned for now.
	file := filepath.Join(dir, "swap-v3.wasm")
	must(t, os.WriteFile(file, mustRead(t, wasmFile(t, "testguests", "swap-v3")), 0o644))
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: signed
    module: oci://%s
    pollInterval: 250ms
    namespaces: [%s]
    permissions: [{group: follow.wasmrec.dev, resources: [things], verbs: [get, list, watch]}]
    signatures: {keys: [%s]}
  - name: signed-file
    module: %s
    namespaces: [%s]
    permissions: [{group: follow.wasmrec.dev, resources: [things], verbs: [get, list, watch]}, {group: "", resources: [configmaps], verbs: [get, list, watch]}]
    signatures: {keys: [%s]}
`, ref, ns, teamPub, file, ns, teamPub), "--insecure", reg.addr)
	thing := func(name string, n int64) { t.Helper(); createThing(t, ns, name, n) }
	thing("a", 1)
	h.waitOut(t, "v1 reconciled a n=1")
	h.waitOut(t, `plugin not loaded; the others run`)
	if s := h.out.String(); !strings.Contains(s, "is not signed; it must be signed by key "+teamFP+" ("+teamPub+")") || !strings.Contains(s, "signed-file") {
		t.Fatalf("the unsigned module file was not refused as unsigned:\n%s", tail(s, 30))
	}

	// The tag moves to an unsigned module: refused, v1 serves.
	client, err := oci.New(oci.Options{CacheDir: t.TempDir(), Insecure: []string{reg.addr}})
	must(t, err)
	v2, err := client.Push(ctx, module2(t, "swap-v2"), []byte(`{}`), ref)
	must(t, err)
	h.waitOut(t, "tag moved to a module that is not signed as required")
	thing("b", 2)
	h.waitOut(t, "v1 reconciled b n=2")

	// Signed by another key: still refused; verify names both keys.
	mustCLI(t, append([]string{"sign", ref, "--key", otherKey}, ociFlags...)...)
	out, err = cli(t, append([]string{"verify", ref, "--key", teamPub}, ociFlags...)...)
	if err == nil || !strings.Contains(out, "not signed by key "+teamFP) || !strings.Contains(out, "it is signed by key "+otherFP) {
		t.Fatalf("wasmrec verify of a module signed by another key: %v\n%s", err, out)
	}
	time.Sleep(time.Second) // four polls
	thing("c", 3)
	h.waitOut(t, "v1 reconciled c n=3")
	if strings.Contains(h.out.String(), "v2 reconciled") {
		t.Fatal("a module signed by another key ran")
	}

	// The team signs it: it swaps in, without the tag moving.
	signed := time.Now()
	mustCLI(t, append([]string{"sign", reg.addr + "/plugins/signed@" + v2, "--key", teamKey}, ociFlags...)...)
	h.waitOut(t, "v2 reconciled c n=3")
	t.Logf("v2 signed by the team: swapped in %s later (poll interval 250ms)", time.Since(signed).Round(time.Millisecond))

	// The module file, signed beside it: loaded on the supervisor's next try.
	signed = time.Now()
	if out := mustCLI(t, "sign", file, "--key", teamKey); !strings.Contains(out, file+signature.FileSuffix) {
		t.Fatalf("wasmrec sign of a file printed:\n%s", out)
	}
	h.waitOut(t, "v3 reconciled")
	t.Logf("the module file signed: loaded %s later", time.Since(signed).Round(time.Millisecond))
	if n := strings.Count(h.out.String(), "module swap refused"); n != 1 {
		t.Errorf("%d refused swaps logged, want 1 (the unsigned tag move, said once)", n)
	}
}

// Keyless: a ClusterPlugin whose modules must be signed by a CI identity loads a module that
// identity signed (a Sigstore bundle from an offline Fulcio and Rekor, checked under the
// trusted root the operator gave the host), and one signed by another identity is refused with
// both named in its status.
func TestSignedModulesKeyless(t *testing.T) {
	reg := startRegistry(t)
	installThings(t)
	installPluginCRD(t)
	ns := namespace(t)
	ctx := context.Background()
	sigstore, err := signaturetest.New()
	must(t, err)
	trusted, err := sigstore.TrustedRoot()
	must(t, err)
	rootFile := filepath.Join(t.TempDir(), "trusted_root.json")
	must(t, os.WriteFile(rootFile, trusted, 0o644))

	client, err := oci.New(oci.Options{CacheDir: t.TempDir(), Insecure: []string{reg.addr}})
	must(t, err)
	const issuer = "https://token.ci.example"
	push := func(tag, identity string) string {
		ref := reg.addr + "/plugins/keyless:" + tag
		digest, err := client.Push(ctx, module2(t, "swap-v1"), []byte(`{"tag":"`+tag+`"}`), ref)
		must(t, err)
		b, err := sigstore.SignManifest(identity, issuer, reg.addr+"/plugins/keyless", digest)
		must(t, err)
		_, err = client.Attach(ctx, ref, digest, signature.ArtifactType, b, signature.Annotations())
		must(t, err)
		return "oci://" + ref
	}
	good := push("good", "https://ci.example/team-a/release")
	bad := push("bad", "https://ci.example/team-b/release")

	h := startHost(t, fmt.Sprintf("plugins: []\npluginObjects: {sources: [oci://%s/plugins/]}\nsignatures: {trustedRoot: %s}\n", reg.addr, rootFile), "--insecure", reg.addr)
	h.waitOut(t, `msg="starting workers" controller=plugins`)
	for name, module := range map[string]string{"keyless-good": good, "keyless-bad": bad} {
		obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name},
			"spec": map[string]any{"module": module, "namespaces": []any{ns},
				"permissions": []any{map[string]any{"group": "follow.wasmrec.dev", "resources": []any{"things"}, "verbs": []any{"get", "list", "watch"}}},
				"signatures":  map[string]any{"identities": []any{map[string]any{"issuer": issuer, "subjectRegExp": `^https://ci\.example/team-a/`}}}}}}
		_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
		must(t, err)
	}
	eventually(t, 30*time.Second, "keyless-good Ready", func() error {
		if s, m := objectCondition(t, pluginGVR, "", "keyless-good", "Ready"); s != "True" {
			return fmt.Errorf("Ready=%s: %s", s, m)
		}
		return nil
	})
	eventually(t, 30*time.Second, "keyless-bad refused", func() error {
		s, m := objectCondition(t, pluginGVR, "", "keyless-bad", "Degraded")
		if s != "True" || !strings.Contains(m, "it is signed by https://ci.example/team-b/release (issuer "+issuer+")") ||
			!strings.Contains(m, `not signed by a subject matching "^https://ci\\.example/team-a/" (issuer `+issuer+")") {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		t.Logf("keyless-bad: %s", m)
		return nil
	})
	// The keyless-good module is never the bad one's: only one compile of the shared module ran
	// for the good object (the bad one was refused before it was compiled).
	if strings.Contains(h.out.String(), `plugin loaded" plugin=keyless-bad`) {
		t.Error("the module signed by another identity was loaded")
	}
}
