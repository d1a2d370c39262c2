// Package signature checks who signed a plugin's module, and signs one. Signatures are Sigstore
// bundles (what cosign writes with --new-bundle-format), verified with sigstore-go against
// public keys or, keyless, against certificate identities (an OIDC issuer and subject) under a
// trusted root the operator supplies as a file, so that verification never needs the network.
//
// A module from a registry is signed by its manifest's digest, in a bundle attached to that
// manifest as an OCI referrer (artifact type ArtifactType, which `oras discover` and `cosign
// verify --new-bundle-format` find); a module file by its bytes, in a bundle beside it
// (FILE.sigstore.json, as `cosign sign-blob --bundle` writes).
package signature
