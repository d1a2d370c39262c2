package signature_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/signature/signaturetest"
)

// newKey writes a fresh private key (PKCS #8 PEM) and returns it read back.
func newKey(t testing.TB, ed bool) *signature.Key {
	t.Helper()
	var k any
	var err error
	if ed {
		_, k, err = ed25519.GenerateKey(rand.Reader)
	} else {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signature.ReadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func public(t testing.TB, k *signature.Key) string {
	t.Helper()
	p, err := k.Public()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func digestOf(b []byte) (string, []byte) {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), sum[:]
}

// A module signed with a key passes a policy naming that key, and no other; an unsigned one
// is refused; each refusal names the signer found and the one wanted.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	for _, ed := range []bool{false, true} {
		good, other := newKey(t, ed), newKey(t, ed)
		checker, err := signature.Policy{Keys: []string{public(t, good)}}.Compile(signature.Options{})
		if err != nil {
			t.Fatal(err)
		}
		manifest, sum := digestOf([]byte(`{"a manifest"}`))
		byGood, err := good.SignManifest(ctx, "registry.example/team/app", manifest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checker.Check([][]byte{byGood}, sum); err != nil {
			t.Errorf("ed25519=%t: a manifest signed by the key: %v", ed, err)
		}
		wasm := []byte("\x00asm a module")
		_, wasmSum := digestOf(wasm)
		blob, err := good.SignBlob(ctx, "module.wasm", wasm)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checker.Check([][]byte{blob}, wasmSum); err != nil {
			t.Errorf("ed25519=%t: a file signed by the key: %v", ed, err)
		}
		if by, err := checker.Check([][]byte{blob}, wasmSum); err != nil || by != "key "+good.Fingerprint() {
			t.Errorf("ed25519=%t: signed by %q, %v; want key %s", ed, by, err, good.Fingerprint())
		}
		// The right signer, other bytes: a module rebuilt and not signed again.
		if _, err := checker.Check([][]byte{blob}, sum); err == nil || !strings.Contains(err.Error(), "the module changed after it was signed; sign it again") {
			t.Errorf("ed25519=%t: a signature of other bytes: %v", ed, err)
		}
		byOther, err := other.SignManifest(ctx, "registry.example/team/app", manifest)
		if err != nil {
			t.Fatal(err)
		}
		_, err = checker.Check([][]byte{byOther}, sum)
		var refused *signature.Error
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "signed by key "+other.Fingerprint()) ||
			!strings.Contains(err.Error(), "not signed by key "+good.Fingerprint()) {
			t.Errorf("ed25519=%t: signed by another key: %v", ed, err)
		}
		// Two signatures, one good: it passes.
		if _, err := checker.Check([][]byte{byOther, byGood}, sum); err != nil {
			t.Errorf("ed25519=%t: with a good signature among two: %v", ed, err)
		}
		if _, err := checker.Check(nil, sum); err == nil || !strings.Contains(err.Error(), "is not signed; it must be signed by key "+good.Fingerprint()) {
			t.Errorf("unsigned: %v", err)
		}
	}
}

// Keyless: a bundle from the (offline) Sigstore passes a policy naming its identity and issuer
// under that Sigstore's trusted root, and not another identity's, nor under another root.
func TestIdentities(t *testing.T) {
	sig, err := signaturetest.New()
	if err != nil {
		t.Fatal(err)
	}
	rootJSON, err := sig.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, rootJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, err := signature.LoadTrustedRoot(path)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://token.actions.example"
	policy := signature.Policy{Identities: []signature.Identity{{Issuer: issuer, SubjectRegExp: `^https://ci\.example/team-a/`}}}
	checker, err := policy.Compile(signature.Options{TrustedRoot: trusted})
	if err != nil {
		t.Fatal(err)
	}
	manifest, sum := digestOf([]byte(`{"a manifest"}`))
	good, err := sig.SignManifest("https://ci.example/team-a/release", issuer, "registry.example/team-a/app", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checker.Check([][]byte{good}, sum); err != nil {
		t.Fatalf("signed by the identity: %v", err)
	}
	bad, err := sig.SignManifest("https://ci.example/team-b/release", issuer, "registry.example/team-a/app", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checker.Check([][]byte{bad}, sum); err == nil || !strings.Contains(err.Error(), "signed by https://ci.example/team-b/release (issuer "+issuer+")") {
		t.Errorf("signed by another identity: %v", err)
	}
	elsewhere, err := signaturetest.New()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := elsewhere.SignManifest("https://ci.example/team-a/release", issuer, "registry.example/team-a/app", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checker.Check([][]byte{forged}, sum); err == nil {
		t.Error("a signature under another trusted root passed")
	}
	if _, err := policy.Compile(signature.Options{}); err == nil || !strings.Contains(err.Error(), "trusted root") {
		t.Errorf("identities without a trusted root: %v", err)
	}
}

// Bad policies are refused with what is wrong and where.
func TestBadPolicies(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "team.pub")
	if err := os.WriteFile(keyFile, []byte(public(t, newKey(t, false))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy signature.Policy
		files  bool
		want   string
	}{
		{signature.Policy{Keys: []string{keyFile}}, false, "keys[0]: not a PEM public key"},
		{signature.Policy{Keys: []string{"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}}, false, "keys[0]"},
		{signature.Policy{Keys: []string{filepath.Join(dir, "missing.pub")}}, true, "keys[0]: reading the public key"},
		{signature.Policy{Keys: []string{"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}}, false, "keys[0]: a private key, where its public half belongs"},
		{signature.Policy{Identities: []signature.Identity{{Subject: "a"}}}, false, "identities[0]: give the issuer"},
		{signature.Policy{Identities: []signature.Identity{{Issuer: "i", SubjectRegExp: "("}}}, false, "identities[0]: \"(\" is not a regular expression"},
	} {
		if _, err := tc.policy.Compile(signature.Options{KeyFiles: tc.files}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.policy, err, tc.want)
		}
	}
	if _, err := (signature.Policy{Keys: []string{keyFile}}).Compile(signature.Options{KeyFiles: true}); err != nil {
		t.Errorf("a key file in the host config: %v", err)
	}
}

// What a check costs a load or a swap: one key-signed bundle, and one keyless bundle with its
// certificate chain, log inclusion proof and timestamp.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	manifest, sum := digestOf([]byte(`{"a manifest"}`))
	key := newKey(b, false)
	pub, err := key.Public()
	if err != nil {
		b.Fatal(err)
	}
	byKey, err := key.SignManifest(ctx, "registry.example/app", manifest)
	if err != nil {
		b.Fatal(err)
	}
	keyChecker, err := signature.Policy{Keys: []string{pub}}.Compile(signature.Options{})
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signaturetest.New()
	if err != nil {
		b.Fatal(err)
	}
	rootJSON, err := sig.TrustedRoot()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, rootJSON, 0o600); err != nil {
		b.Fatal(err)
	}
	trusted, err := signature.LoadTrustedRoot(path)
	if err != nil {
		b.Fatal(err)
	}
	keyless, err := sig.SignManifest("https://ci.example/release", "https://issuer.example", "registry.example/app", manifest)
	if err != nil {
		b.Fatal(err)
	}
	idChecker, err := signature.Policy{Identities: []signature.Identity{{Issuer: "https://issuer.example", Subject: "https://ci.example/release"}}}.Compile(signature.Options{TrustedRoot: trusted})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		checker *signature.Checker
		bundle  []byte
	}{{"key", keyChecker, byKey}, {"keyless", idChecker, keyless}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.checker.Check([][]byte{bc.bundle}, sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
