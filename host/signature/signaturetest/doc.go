// Package signaturetest stands in for Sigstore's public services, offline, in tests: a
// certificate authority (Fulcio), a transparency log (Rekor) and a timestamp authority, from
// sigstore-go's VirtualSigstore. It signs modules keyless as a CI workflow would, and writes the
// trusted root a host checks those signatures under.
package signaturetest
