// Command typegen generates sdk/go/k8s: the Go types of the Kubernetes kinds the pinned API
// server serves, with k8s.io/api's names, fields and JSON tags, and for each a reflection-free
// JSON decoder and encoder (on sdk/go/codec) and a deep copy.
//
//	typegen digest -kubeconfig FILE > served.json   # what the API server serves, from its OpenAPI v3
//	typegen generate -served served.json -out DIR   # the packages, under DIR
//
// The OpenAPI decides which kinds there are and which JSON fields each type has; k8s.io/api,
// at the version the API server is built from, gives their Go names and types, which the
// OpenAPI does not carry (serviceAccount is DeprecatedServiceAccount, chapAuthDiscovery is
// DiscoveryCHAPAuth). Every generated struct's JSON fields are checked against the OpenAPI's.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "digest":
		fs := flag.NewFlagSet("digest", flag.ExitOnError)
		kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server to read")
		_ = fs.Parse(os.Args[2:])
		var s *Served
		if s, err = digest(*kubeconfig); err == nil {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", " ")
			err = enc.Encode(s)
		}
	case "generate":
		fs := flag.NewFlagSet("generate", flag.ExitOnError)
		served := fs.String("served", "served.json", "the digest of the API server's OpenAPI")
		out := fs.String("out", "", "the directory that stands for "+outRoot)
		kindsTest := fs.String("kinds-test", "", "where to write the list of kinds typegen's tests use")
		scaffoldKinds := fs.String("scaffold-kinds", "", "where to write the list of kinds wasmrec new makes typed plugins of")
		fakePatchMeta := fs.String("fake-patch-meta", "", "where to write the built-in kinds' patch metadata for the SDK's fake cluster")
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			usage()
		}
		err = generate(*served, *out, *kindsTest, *scaffoldKinds, *fakePatchMeta)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "typegen:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: typegen digest -kubeconfig FILE > served.json\n       typegen generate -served served.json -out DIR")
	os.Exit(2)
}
