package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushRef parses where -push names, a tag.
func pushRef(s string, insecure bool) (name.Tag, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s, opts...)
	if err != nil {
		return name.Tag{}, err
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return name.Tag{}, fmt.Errorf("%s names a digest: push to a tag (the digest is the image's)", s)
	}
	return tag, nil
}

// push writes img to tag, with the credentials of the usual docker config file, and returns
// the image's reference by digest there.
func push(ctx context.Context, img v1.Image, tag name.Tag, insecure bool) (name.Digest, error) {
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithTransport(plainHTTPGuard{base: remote.DefaultTransport, insecure: insecure}), remote.WithUserAgent("wasmrec-image")); err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(d.String()), nil
}

// plainHTTPGuard refuses requests over plain HTTP but to a loopback address, unless insecure.
// go-containerregistry falls back to HTTP for more than that (private addresses, *.local).
type plainHTTPGuard struct {
	base     http.RoundTripper
	insecure bool
}

func (g plainHTTPGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !g.insecure && !loopback(r.URL.Hostname()) {
		return nil, fmt.Errorf("not reaching %s over plain HTTP: only a registry on a loopback address is, unless -insecure (IMAGE_FLAGS=-insecure) is given", r.URL.Host)
	}
	return g.base.RoundTrip(r)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// imageLine is the Deployment's image line left for this tool.
var imageLine = regexp.MustCompile(`(?m)^([ \t]*(?:-[ \t]+)?image:[ \t]*)WASMREC_IMAGE[ \t]*$`)

// writeManifests copies src/*.yaml into dst with each `image: WASMREC_IMAGE` set to image.
func writeManifests(src, dst, image string) error {
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	set := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		set += len(imageLine.FindAllIndex(b, -1))
		b = imageLine.ReplaceAll(b, []byte("${1}"+image))
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	if set == 0 {
		return fmt.Errorf("no line `image: WASMREC_IMAGE` in %s/*.yaml to set to %s", src, image)
	}
	return nil
}
