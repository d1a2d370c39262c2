package signaturetest

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/wasmrec/wasmrec/host/signature"
)

// Sigstore is an offline Fulcio, Rekor and timestamp authority.
type Sigstore struct{ ca *ca.VirtualSigstore }

// New starts one, with keys of its own.
func New() (*Sigstore, error) {
	v, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, err
	}
	return &Sigstore{ca: v}, nil
}

// TrustedRoot is its trusted_root.json, which a host is given to check its signatures.
func (s *Sigstore) TrustedRoot() ([]byte, error) {
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, s.ca.FulcioCertificateAuthorities(),
		rawIDs(s.ca.CTLogs()), s.ca.TimestampingAuthorities(), rawIDs(s.ca.RekorLogs()))
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// rawIDs gives VirtualSigstore's logs the IDs a trusted_root.json holds: the log's key ID
// itself, not its hex form (which VirtualSigstore keeps, and which only its in-memory trusted
// material reads back).
func rawIDs(logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
	out := map[string]*root.TransparencyLog{}
	for id, l := range logs {
		raw, err := hex.DecodeString(id)
		if err != nil {
			panic(err) // VirtualSigstore's IDs are hex
		}
		c := *l
		c.ID = raw
		out[id] = &c
	}
	return out
}

// SignManifest signs a module's OCI manifest (digest "sha256:...", in repository name) as
// identity, vouched for by issuer: a Sigstore bundle as `cosign sign --new-bundle-format` makes
// keyless, with its certificate, log entry (and inclusion proof) and timestamp.
func (s *Sigstore) SignManifest(identity, issuer, name, digest string) ([]byte, error) {
	if len(digest) < 8 || digest[:7] != "sha256:" {
		return nil, fmt.Errorf("%q is not a sha256 digest", digest)
	}
	statement, err := signature.Statement(name, digest[7:])
	if err != nil {
		return nil, err
	}
	// At a time the leaf certificate is valid at, as VirtualSigstore's own Attest does.
	e, err := s.ca.AttestAtTime(identity, issuer, statement, time.Now().Add(5*time.Minute), true)
	if err != nil {
		return nil, err
	}
	vc, err := e.VerificationContent()
	if err != nil {
		return nil, err
	}
	sc, err := e.SignatureContent()
	if err != nil {
		return nil, err
	}
	env := sc.(*bundle.Envelope).Envelope
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, err
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return nil, err
	}
	entries, err := e.TlogEntries()
	if err != nil {
		return nil, err
	}
	tle := proto.Clone(entries[0].TransparencyLogEntry()).(*protorekor.TransparencyLogEntry)
	tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
	timestamps, err := e.Timestamps()
	if err != nil {
		return nil, err
	}
	var tsa []*protocommon.RFC3161SignedTimestamp
	for _, t := range timestamps {
		tsa = append(tsa, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: t})
	}
	b := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_Certificate{
				Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries:               []*protorekor.TransparencyLogEntry{tle},
			TimestampVerificationData: &protobundle.TimestampVerificationData{Rfc3161Timestamps: tsa},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType, Signatures: []*protodsse.Signature{{Sig: sig}}}},
	}
	return protojson.Marshal(b)
}
