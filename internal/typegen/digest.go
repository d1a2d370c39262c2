package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Served is what the API server serves, digested from its OpenAPI v3: the kinds of k8s.io/api
// (the definitions named io.k8s.api.*, with the group, version and kind the server gives them),
// and each definition's JSON property names, which every generated struct is checked against.
type Served struct {
	Server     string              `json:"server"`
	Kinds      []ServedKind        `json:"kinds"`
	Properties map[string][]string `json:"properties"`
}

// ServedKind is one kind the API server serves.
type ServedKind struct {
	Group      string `json:"group"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Definition string `json:"definition"`
}

type openAPIDoc struct {
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			GVK        []struct {
				Group   string `json:"group"`
				Version string `json:"version"`
				Kind    string `json:"kind"`
			} `json:"x-kubernetes-group-version-kind"`
		} `json:"schemas"`
	} `json:"components"`
}

// digest reads the OpenAPI v3 documents of every group version the kubeconfig's API server
// serves.
func digest(kubeconfig string) (*Served, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	get := func(path string) ([]byte, error) {
		resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		return body, err
	}
	var index struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	body, err := get("/openapi/v3")
	if err != nil {
		return nil, fmt.Errorf("reading /openapi/v3: %w", err)
	}
	if err := json.Unmarshal(body, &index); err != nil {
		return nil, err
	}
	ver, err := get("/version")
	if err != nil {
		return nil, err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	_ = json.Unmarshal(ver, &v)
	out := &Served{Server: "kube-apiserver " + v.GitVersion, Properties: map[string][]string{}}
	seen := map[string]bool{}
	for path := range index.Paths {
		if path != "api/v1" && !(strings.HasPrefix(path, "apis/") && strings.Count(path, "/") == 2) {
			continue
		}
		body, err := get("/openapi/v3/" + path)
		if err != nil {
			return nil, fmt.Errorf("reading /openapi/v3/%s: %w", path, err)
		}
		var doc openAPIDoc
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("/openapi/v3/%s: %w", path, err)
		}
		for name, s := range doc.Components.Schemas {
			if !strings.HasPrefix(name, "io.k8s.api.") && !strings.HasPrefix(name, "io.k8s.apimachinery.pkg.apis.meta.v1.") {
				continue
			}
			props := make([]string, 0, len(s.Properties))
			for p := range s.Properties {
				props = append(props, p)
			}
			slices.Sort(props)
			out.Properties[name] = props
			if !strings.HasPrefix(name, "io.k8s.api.") {
				continue
			}
			for _, g := range s.GVK {
				k := ServedKind{Group: g.Group, Version: g.Version, Kind: g.Kind, Definition: name}
				if key := fmt.Sprint(k); !seen[key] {
					seen[key] = true
					out.Kinds = append(out.Kinds, k)
				}
			}
		}
	}
	slices.SortFunc(out.Kinds, func(a, b ServedKind) int {
		return strings.Compare(a.Group+"/"+a.Version+"/"+a.Kind, b.Group+"/"+b.Version+"/"+b.Kind)
	})
	return out, nil
}
