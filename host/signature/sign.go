package signature

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// Annotations are those cosign gives the manifest of a bundle it attaches (and a registry's
// referrers list repeats), for a signature made by SignManifest.
func Annotations() map[string]string {
	return map[string]string{
		"dev.sigstore.bundle.content":       "dsse-envelope",
		"dev.sigstore.bundle.predicateType": predicateType,
		"org.opencontainers.image.created":  time.Now().UTC().Format(time.RFC3339),
	}
}

const predicateType = "https://sigstore.dev/cosign/sign/v1"

// Key is a private key that signs modules.
type Key struct {
	signer crypto.Signer
	hint   string // its fingerprint
}

// ReadKey reads an unencrypted PEM private key (PKCS #8, or SEC 1 for ECDSA): ECDSA P-256 or
// Ed25519.
func ReadKey(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: not a PEM private key (openssl genpkey -algorithm ed25519 writes one)", path)
	}
	var k any
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: a PEM %q, not an unencrypted private key: cosign's encrypted keys are not read; use a PKCS #8 key (openssl genpkey -algorithm ed25519)", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch s := k.(type) {
	case *ecdsa.PrivateKey:
		if s.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%s: an ECDSA key on %s: use P-256 or Ed25519", path, s.Curve.Params().Name)
		}
		return newKey(s)
	case ed25519.PrivateKey:
		return newKey(s)
	default:
		return nil, fmt.Errorf("%s: a %T: use an ECDSA P-256 or Ed25519 key", path, k)
	}
}

func newKey(s crypto.Signer) (*Key, error) {
	fp, err := Fingerprint(s.Public())
	if err != nil {
		return nil, err
	}
	return &Key{signer: s, hint: fp}, nil
}

// Public returns the key's public half in PEM, as a Policy takes it.
func (k *Key) Public() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.signer.Public())
	return string(b), err
}

// Fingerprint names the key, as a refusal does.
func (k *Key) Fingerprint() string { return k.hint }

// SignManifest signs a module's OCI manifest, by its digest ("sha256:..."), as cosign's new
// bundle format does: an in-toto statement about the manifest in a DSSE envelope. name is the
// repository, for the statement's subject.
func (k *Key) SignManifest(ctx context.Context, name, digest string) ([]byte, error) {
	return k.signStatement(ctx, name, digest)
}

// SignBlob signs a module file's bytes: an in-toto statement about their SHA-256, as for a
// manifest. (cosign sign-blob's message signatures are checked as well, but an Ed25519 key
// cannot make one over a digest.)
func (k *Key) SignBlob(ctx context.Context, name string, data []byte) ([]byte, error) {
	sum := sha256.Sum256(data)
	return k.signStatement(ctx, name, "sha256:"+hex.EncodeToString(sum[:]))
}

func (k *Key) signStatement(ctx context.Context, name, digest string) ([]byte, error) {
	algo, hexDigest, ok := cut(digest)
	if !ok || algo != "sha256" {
		return nil, fmt.Errorf("%q is not a sha256 digest", digest)
	}
	statement, err := Statement(name, hexDigest)
	if err != nil {
		return nil, err
	}
	return k.bundle(ctx, &sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"})
}

// Statement is the in-toto statement a signature of a module is about: cosign's, for one
// subject, the artifact named name with SHA-256 hexDigest.
func Statement(name, hexDigest string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": name, "digest": map[string]string{"sha256": hexDigest}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
}

func (k *Key) bundle(ctx context.Context, content sign.Content) ([]byte, error) {
	b, err := sign.Bundle(content, keypair{k}, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return protojson.Marshal(b)
}

func cut(digest string) (algo, hexDigest string, ok bool) {
	for i := range len(digest) {
		if digest[i] == ':' {
			_, err := hex.DecodeString(digest[i+1:])
			return digest[:i], digest[i+1:], err == nil
		}
	}
	return "", "", false
}

// keypair is a Key as sigstore-go signs with one.
type keypair struct{ k *Key }

func (p keypair) ed() bool {
	_, ok := p.k.signer.(ed25519.PrivateKey)
	return ok
}

func (p keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (p keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	if p.ed() {
		return protocommon.PublicKeyDetails_PKIX_ED25519
	}
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (p keypair) GetHint() []byte { return []byte(p.k.hint) }

func (p keypair) GetKeyAlgorithm() string {
	if p.ed() {
		return "ED25519"
	}
	return "ECDSA"
}

func (p keypair) GetPublicKey() crypto.PublicKey { return p.k.signer.Public() }

func (p keypair) GetPublicKeyPem() (string, error) { return p.k.Public() }

// SignData signs data: ECDSA signs its SHA-256, Ed25519 the data itself. It returns the
// signature and what was signed.
func (p keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	if p.ed() {
		sig, err := p.k.signer.Sign(rand.Reader, data, crypto.Hash(0))
		return sig, data, err
	}
	h := crypto.SHA256.New()
	h.Write(data)
	sum := h.Sum(nil)
	sig, err := p.k.signer.Sign(rand.Reader, sum, crypto.SHA256)
	if err != nil {
		return nil, nil, errors.Join(errors.New("signing"), err)
	}
	return sig, sum, nil
}
