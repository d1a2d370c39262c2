package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/signature"
)

// HostSignatures is the host config's say on signatures: who must have signed every module
// this host runs (the host config's plugins and plugin objects' alike), and the trusted root
// keyless signatures are checked under.
type HostSignatures struct {
	signature.Policy `json:",inline"`
	// TrustedRoot is the path of the trusted root (sigstore's trusted_root.json: Fulcio CAs,
	// Rekor logs, timestamp authorities) that identities, the host's and the plugins', are
	// checked under. Read once, at start: no network is needed to verify.
	TrustedRoot string `json:"trustedRoot,omitempty"`
}

// Signatures are HostSignatures, read and checked (Compile). The zero value asks for nothing.
type Signatures struct {
	options signature.Options  // the trusted root, for the plugins' identities
	host    *signature.Checker // nil: the host asks for no signature
}

// Compile reads the trusted root and checks the host's policy. Errors name the field.
func (s HostSignatures) Compile() (*Signatures, error) {
	out := &Signatures{options: signature.Options{KeyFiles: true}}
	if s.TrustedRoot != "" {
		tr, err := signature.LoadTrustedRoot(s.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("signatures.trustedRoot: %w", err)
		}
		out.options.TrustedRoot = tr
	}
	if !s.Policy.IsZero() {
		opts := out.options
		opts.Label = "the host config's signatures"
		c, err := s.Policy.Compile(opts)
		if err != nil {
			return nil, fmt.Errorf("signatures: %w", err)
		}
		out.host = c
	}
	return out, nil
}

// checkers are who must have signed cfg's modules: the host's signers, and the plugin's own.
// A plugin object's keys are given inline; the host config's may be files.
func (h *Host) checkers(cfg Config) ([]*signature.Checker, error) {
	var out []*signature.Checker
	if h.signatures.host != nil {
		out = append(out, h.signatures.host)
	}
	if cfg.Signatures != nil && !cfg.Signatures.IsZero() {
		opts := h.signatures.options
		opts.KeyFiles = cfg.Origin == ""
		if h.signatures.host != nil { // say which of the two refused it
			opts.Label = "the plugin's own signatures"
		}
		c, err := cfg.Signatures.Compile(opts)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: signatures: %w", cfg.Name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// fetchSigned fetches cfg's module from module and checks its signatures. A module not signed
// as required is a *SignatureError.
func (h *Host) fetchSigned(ctx context.Context, cfg Config, module string) ([]byte, *modsource.Source, error) {
	checkers, err := h.checkers(cfg)
	if err != nil {
		return nil, nil, err
	}
	wasm, src, err := h.fetcher.Fetch(ctx, h.oci, module, cfg.bounds())
	if err != nil {
		return nil, nil, &FetchError{Module: module, Err: err}
	}
	if err := h.verify(ctx, cfg.Name, checkers, wasm, src); err != nil {
		return nil, nil, err
	}
	return wasm, src, nil
}

// verify checks wasm's signatures. A module not signed as required is a *SignatureError; a
// registry that cannot be asked a *FetchError.
func (h *Host) verify(ctx context.Context, name string, checkers []*signature.Checker, wasm []byte, src *modsource.Source) error {
	err := modsource.Verify(ctx, h.oci, checkers, wasm, src)
	var refused *signature.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return &SignatureError{Plugin: name, Module: src.Ref, Err: refused}
	}
	return &FetchError{Module: src.Ref, Err: fmt.Errorf("checking its signatures: %w", err)}
}

// SignatureError is a module refused before it is compiled: it is not signed by whom its
// plugin's policy wants. A signature attached later lets it in: it is looked at again.
type SignatureError struct {
	Plugin, Module string
	Err            *signature.Error
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("plugin %q: module %s: %v", e.Plugin, e.Module, e.Err)
}

func (e *SignatureError) Unwrap() error { return e.Err }
