package crd_test

import (
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/host/crd"
)

const two = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: as.x.dev}
---
# a comment-only document is skipped
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: bs.x.dev}
`

func TestParseMultiDocument(t *testing.T) {
	crds, err := crd.Parse([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 || crds[0].Name != "as.x.dev" || crds[1].Name != "bs.x.dev" {
		t.Fatalf("parsed %d CRDs: %v", len(crds), crds)
	}
}

func TestParseRefusesOtherKinds(t *testing.T) {
	_, err := crd.Parse([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: oops}\n"))
	if err == nil || !strings.Contains(err.Error(), `document 1 ("oops") is a v1 ConfigMap`) {
		t.Fatalf("err = %v, want one naming the document and its kind", err)
	}
	_, err = crd.Parse([]byte("apiVersion: [unterminated\n"))
	if err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Fatalf("err = %v, want a parse error naming the document", err)
	}
}

func TestReadMissingFile(t *testing.T) {
	if _, err := crd.Read("no/such/file.yaml"); err == nil || !strings.Contains(err.Error(), "no/such/file.yaml") {
		t.Fatalf("err = %v, want one naming the path", err)
	}
}
