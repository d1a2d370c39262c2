// Command image builds the image deploy/deployment.yaml runs, with no container engine and no base
// image: an OCI image layout of three layers, assembled with go-containerregistry.
//
//   - base: what a static Go binary needs from a distroless-like root made from scratch.
//     /etc/passwd and /etc/group with root and nonroot (65532:65532, home /home/nonroot, where
//     the runtime's HOME points and so the OCI module cache goes), /tmp (1777),
//     /var/cache/wasmrec owned by nonroot (the compilation cache's directory), and
//     /etc/ssl/certs/ca-certificates.crt. The CA certificates are the host's
//     (/etc/ssl/certs/ca-certificates.crt, -ca-certs): the host pulls plugin modules from
//     HTTPS registries and reaches the API server and Sigstore's services with Go's
//     crypto/tls, which reads that file on Linux. The image's digest then depends on the host's
//     ca-certificates package too.
//   - plugins: bin/plugins/*.wasm under /plugins/ (0644).
//   - wasmrec: bin/wasmrec at /usr/local/bin/wasmrec (0755). It must be a static Linux ELF
//     binary (CGO_ENABLED=0, as `make build` builds it): the image has no libc. The image's
//     architecture is the binary's.
//
// The config runs /usr/local/bin/wasmrec as 65532:65532 in /, with PATH alone in the
// environment, and the OCI labels org.opencontainers.image.source, .version and .revision.
//
// The same inputs give the same digest: every entry is written in path order with uid and gid
// 0 (nonroot's folders 65532), fixed modes and the time of SOURCE_DATE_EPOCH, or else of the
// last commit, which is also the config's and the history's creation time; gzip writes no
// name and no time. The inputs are the binary, the plugins, the CA file, the labels and that
// time (and the Go toolchain's gzip).
//
// It writes the layout to -o (emptied first) and prints the image's digest; with -push REF it
// pushes the image there (plain HTTP only to a loopback registry, or with -insecure). With
// -push or -repo, it also writes -o/deploy/: deploy/*.yaml with the Deployment's
// `image: WASMREC_IMAGE` set to the repository by digest.
//
//	go run ./internal/cmd/image -o bin/image -push registry.example.com/wasmrec:v0.1.0
package main
