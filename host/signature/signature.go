package signature

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
)

// ArtifactType is the artifact and media type of a Sigstore bundle attached to a module.
const ArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// FileSuffix names the bundle of a module file: module.wasm's is module.wasm.sigstore.json.
const FileSuffix = ".sigstore.json"

// Identity is a keyless signer: the OIDC issuer that vouched for it and the subject it vouched
// for (an e-mail, or a CI workflow's URI), each exactly or as a regular expression.
type Identity struct {
	Issuer        string `json:"issuer,omitempty"`
	IssuerRegExp  string `json:"issuerRegExp,omitempty"`
	Subject       string `json:"subject,omitempty"`
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

func (id Identity) String() string {
	s, i := id.Subject, id.Issuer
	if s == "" {
		s = fmt.Sprintf("a subject matching %q", id.SubjectRegExp)
	}
	if i == "" {
		i = fmt.Sprintf("matching %q", id.IssuerRegExp)
	}
	return fmt.Sprintf("%s (issuer %s)", s, i)
}

// Policy says who may sign a plugin's modules: any one of its keys or identities. The zero
// Policy asks for nothing.
type Policy struct {
	// Keys are PEM public keys (ECDSA or Ed25519), each given inline or, in the host config
	// only, as the path of a file holding one.
	Keys []string `json:"keys,omitempty"`
	// Identities are keyless signers, checked under the host's trusted root.
	Identities []Identity `json:"identities,omitempty"`
}

// IsZero tells whether p asks for no signature.
func (p Policy) IsZero() bool { return len(p.Keys) == 0 && len(p.Identities) == 0 }

// Options are what compiling a Policy may use.
type Options struct {
	// TrustedRoot is the trusted root (Fulcio CAs, Rekor logs, timestamp authorities) keyless
	// signatures are checked under: sigstore's trusted_root.json format. Required by identities.
	TrustedRoot root.TrustedMaterial
	// KeyFiles lets keys be file paths (the host config's); a plugin object's keys are inline.
	KeyFiles bool
	// Label names the policy in refusals ("the host config's signatures"), when a module must
	// pass more than one.
	Label string
}

// LoadTrustedRoot reads a trusted_root.json.
func LoadTrustedRoot(path string) (root.TrustedMaterial, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	tr, err := root.NewTrustedRootFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s: %w (it is sigstore's trusted_root.json: `cosign trusted-root create`, or the one sigstore's TUF repository serves)", path, err)
	}
	return tr, nil
}

// time0 is no bound: a key is valid at any time.
var time0 time.Time

// A Checker checks bundles against one Policy.
type Checker struct {
	label      string
	keys       []key
	identities []Identity
	policy     []verify.PolicyOption // the identities, for sigstore-go
	keyless    *verify.Verifier      // nil without identities
}

type key struct {
	name     string // "key sha256:0123456789ab" and, for a file, its path
	hint     string // "sha256:0123456789ab", as a bundle made with it says
	verifier *verify.Verifier
}

// Validate checks p as far as it can without a trusted root: its keys parse (and, with
// keyFiles, their files), its identities are whole and their expressions compile.
func (p Policy) Validate(keyFiles bool) error {
	for i, k := range p.Keys {
		if _, _, _, err := readPublicKey(k, keyFiles); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
	}
	for i, id := range p.Identities {
		if err := id.validate(); err != nil {
			return fmt.Errorf("identities[%d]: %w", i, err)
		}
	}
	return nil
}

func (id Identity) validate() error {
	if (id.Issuer == "") == (id.IssuerRegExp == "") || (id.Subject == "") == (id.SubjectRegExp == "") {
		return errors.New("give the issuer as issuer or issuerRegExp, and the subject as subject or subjectRegExp, one of each")
	}
	for _, re := range []string{id.IssuerRegExp, id.SubjectRegExp} {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("%q is not a regular expression: %w", re, err)
		}
	}
	return nil
}

// Compile checks p and builds its Checker. Errors name the key or identity at fault.
func (p Policy) Compile(opts Options) (*Checker, error) {
	c := &Checker{label: opts.Label, identities: p.Identities}
	for i, k := range p.Keys {
		pub, name, hint, err := readPublicKey(k, opts.KeyFiles)
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		v, err := sigsig.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("keys[%d] (%s): %w", i, name, err)
		}
		material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			return root.NewExpiringKey(v, time0, time0), nil
		})
		kv, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
		if err != nil {
			return nil, fmt.Errorf("keys[%d] (%s): %w", i, name, err)
		}
		c.keys = append(c.keys, key{name: name, hint: hint, verifier: kv})
	}
	for i, id := range p.Identities {
		if err := id.validate(); err != nil {
			return nil, fmt.Errorf("identities[%d]: %w", i, err)
		}
		ci, err := verify.NewShortCertificateIdentity(id.Issuer, id.IssuerRegExp, id.Subject, id.SubjectRegExp)
		if err != nil {
			return nil, fmt.Errorf("identities[%d]: %w", i, err)
		}
		c.policy = append(c.policy, verify.WithCertificateIdentity(ci))
	}
	if len(p.Identities) > 0 {
		if opts.TrustedRoot == nil {
			return nil, errors.New("identities need a trusted root to be checked under, and none was given (signatures.trustedRoot in the host config; --trusted-root for wasmrec verify)")
		}
		v, err := verify.NewVerifier(opts.TrustedRoot, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
		if err != nil {
			return nil, fmt.Errorf("the trusted root: %w", err)
		}
		c.keyless = v
	}
	return c, nil
}

// Wanted describes who c accepts.
func (c *Checker) Wanted() string {
	var w []string
	for _, k := range c.keys {
		w = append(w, k.name)
	}
	for _, id := range c.identities {
		w = append(w, id.String())
	}
	return strings.Join(w, " or ")
}

// Check returns who signed the artifact whose SHA-256 is digest, if one of bundles (Sigstore
// bundles in JSON) is a good signature of it by a signer c accepts; otherwise an *Error naming
// the signers it found and those it wanted.
func (c *Checker) Check(bundles [][]byte, digest []byte) (string, error) {
	e := &Error{Policy: c.label, Wanted: c.Wanted()}
	for i, raw := range bundles {
		var b bundle.Bundle
		if err := b.UnmarshalJSON(raw); err != nil {
			e.Problems = append(e.Problems, fmt.Sprintf("signature %d is not a Sigstore bundle: %v", i+1, err))
			continue
		}
		found := signer(&b)
		e.Found = append(e.Found, found)
		artifact := verify.WithArtifactDigest("sha256", digest)
		if pk := b.VerificationMaterial.GetPublicKey(); pk != nil {
			for _, k := range c.keys {
				if _, err := k.verifier.Verify(&b, verify.NewPolicy(artifact, verify.WithKey())); err == nil {
					return k.name, nil
				}
				if k.hint == pk.GetHint() {
					e.Problems = append(e.Problems, fmt.Sprintf("the signature by %s is not of these bytes: the module changed after it was signed; sign it again", k.name))
				}
			}
			continue
		}
		if c.keyless == nil {
			continue
		}
		if res, err := c.keyless.Verify(&b, verify.NewPolicy(artifact, c.policy...)); err == nil {
			if res.Signature != nil && res.Signature.Certificate != nil {
				return fmt.Sprintf("%s (issuer %s)", res.Signature.Certificate.SubjectAlternativeName, res.Signature.Certificate.Issuer), nil
			}
			return found, nil
		}
		// Another signer, or no good signature at all? Only the latter needs more words.
		if _, err := c.keyless.Verify(&b, verify.NewPolicy(artifact, verify.WithoutIdentitiesUnsafe())); err != nil {
			e.Problems = append(e.Problems, fmt.Sprintf("the signature by %s does not verify: %v", found, err))
		}
	}
	return "", e
}

// Error is a module refused for its signatures.
type Error struct {
	Policy   string   // which policy refused it, when there are several ("the host config's signatures")
	Wanted   string   // who may sign it
	Found    []string // who signed it, as the signatures say (not all of them verified)
	Problems []string // why each signature was not enough
}

func (e *Error) Error() string {
	by := ""
	if e.Policy != "" {
		by = " (" + e.Policy + ")"
	}
	if len(e.Found) == 0 && len(e.Problems) == 0 {
		return fmt.Sprintf("the module is not signed; it must be signed by %s%s", e.Wanted, by)
	}
	msg := fmt.Sprintf("the module is not signed by %s%s", e.Wanted, by)
	if len(e.Found) > 0 {
		msg += "; it is signed by " + strings.Join(e.Found, ", ")
	}
	if len(e.Problems) > 0 {
		msg += " (" + strings.Join(e.Problems, "; ") + ")"
	}
	return msg
}

// signer names who a bundle says signed it: a certificate's subject and issuer, or a key's
// fingerprint.
func signer(b *bundle.Bundle) string {
	if pk := b.VerificationMaterial.GetPublicKey(); pk != nil {
		return "key " + pk.GetHint()
	}
	vc, err := b.VerificationContent()
	if err != nil || vc.Certificate() == nil {
		return "an unknown signer"
	}
	s, err := certificate.SummarizeCertificate(vc.Certificate())
	if err != nil {
		return "a certificate that names no identity"
	}
	return fmt.Sprintf("%s (issuer %s)", s.SubjectAlternativeName, s.Issuer)
}

// Fingerprint is how a key is named: "sha256:" and the first 12 hex digits of the SHA-256 of
// its DER form. Key-signed bundles carry it as their key hint.
func Fingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])[:12], nil
}

// readPublicKey reads a PEM public key given inline or, if files, in the file s names. It
// returns the key, its name in messages, and its fingerprint.
func readPublicKey(s string, files bool) (crypto.PublicKey, string, string, error) {
	data, from := []byte(s), ""
	if !strings.Contains(s, "-----BEGIN") {
		if !files {
			return nil, "", "", errors.New("not a PEM public key (-----BEGIN PUBLIC KEY-----): a plugin object gives its keys inline")
		}
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, "", "", fmt.Errorf("reading the public key: %w", err)
		}
		data, from = b, s
	}
	block, _ := pem.Decode(data)
	switch {
	case block != nil && strings.HasSuffix(block.Type, "PRIVATE KEY"):
		return nil, "", "", fmt.Errorf("%sa private key, where its public half belongs (the .pub that wasmrec keygen wrote beside it, or `openssl pkey -pubout`): keep the private key secret", prefix(from))
	case block == nil || block.Type != "PUBLIC KEY":
		return nil, "", "", fmt.Errorf("%snot a PEM public key (-----BEGIN PUBLIC KEY-----, as wasmrec keygen, `cosign public-key` or `openssl pkey -pubout` writes)", prefix(from))
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s%w", prefix(from), err)
	}
	switch pub.(type) {
	case *ecdsa.PublicKey, ed25519.PublicKey:
	case *rsa.PublicKey:
		return nil, "", "", fmt.Errorf("%san RSA key: use an ECDSA or Ed25519 key (wasmrec keygen makes one)", prefix(from))
	default:
		return nil, "", "", fmt.Errorf("%sa key of a kind not used for signing here: use an ECDSA or Ed25519 key (wasmrec keygen makes one)", prefix(from))
	}
	fp, err := Fingerprint(pub)
	if err != nil {
		return nil, "", "", err
	}
	name := "key " + fp
	if from != "" {
		name += " (" + from + ")"
	}
	return pub, name, fp, nil
}

func prefix(file string) string {
	if file == "" {
		return ""
	}
	return file + ": "
}
