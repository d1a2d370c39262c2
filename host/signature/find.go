package signature

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/wasmrec/wasmrec/host/oci"
)

// Find returns the signatures of a module and the SHA-256 they must be of. For a module from a
// registry or image layout (ref, an OCI reference without "oci://", and the manifestDigest it
// resolved to) they are the bundles attached to its manifest, of its manifest's digest; for a
// module file (ref its path, and wasm its bytes) the bundle beside it, of its bytes. A missing
// signature is no bundle, not an error.
func Find(ctx context.Context, c *oci.Client, ref, manifestDigest string, wasm []byte) (bundles [][]byte, sum []byte, err error) {
	if manifestDigest == "" {
		b, err := os.ReadFile(ref + FileSuffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("reading the signature of %s: %w", ref, err)
		}
		if b != nil {
			bundles = [][]byte{b}
		}
		s := sha256.Sum256(wasm)
		return bundles, s[:], nil
	}
	algo, hexDigest, _ := strings.Cut(manifestDigest, ":")
	d, err := hex.DecodeString(hexDigest)
	if algo != "sha256" || err != nil || len(d) != sha256.Size {
		return nil, nil, fmt.Errorf("%s: its manifest digest %q is not a sha256 digest, which signatures are made over", ref, manifestDigest)
	}
	if c == nil {
		return nil, nil, fmt.Errorf("%s comes from a registry, and there is no OCI client to read its signatures", ref)
	}
	if bundles, err = c.Referrers(ctx, ref, manifestDigest, ArtifactType); err != nil {
		return nil, nil, err
	}
	return bundles, d, nil
}
