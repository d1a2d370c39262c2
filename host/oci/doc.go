// Package oci moves plugin modules through OCI registries with oras-go: push in the CNCF
// TAG-Runtime wasm layout (the plugin's manifest in the config), pull by tag or digest in that
// layout or the older one, with the layer's digest verified and kept in an on-disk cache keyed
// by digest, from registries (docker config credentials, plain HTTP only when asked) or OCI
// image-layout directories.
package oci
