package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	orasoci "oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Media types of the two wasm artifact layouts in use.
const (
	// CNCF TAG-Runtime wasm OCI artifact.
	MediaTypeConfig = "application/vnd.wasm.config.v0+json"
	MediaTypeLayer  = "application/wasm"
	// The older layout (wasm-to-oci and friends).
	MediaTypeConfigV1 = "application/vnd.wasm.config.v1+json"
	MediaTypeLayerV1  = "application/vnd.wasm.content.layer.v1+wasm"
)

// LayoutPrefix marks a reference to an OCI image-layout directory: "oci:./dir:tag" or
// "oci:./dir@sha256:...".
const LayoutPrefix = "oci:"

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// CacheDir keeps pulled modules by digest. Defaults to the user cache directory's
	// wasmrec/oci; "-" keeps nothing.
	CacheDir string
	// CacheMaxBytes bounds the cache: once a module kept takes it past the bound, the modules
	// used least lately are removed. Defaults to 1 GiB.
	CacheMaxBytes int64
	// Insecure lists registries ("host:port") reached over plain HTTP. Others use HTTPS.
	Insecure []string
	// Progress, if set, receives a line per step of a pull or push.
	Progress io.Writer
}

// DefaultCacheMaxBytes is Options.CacheMaxBytes when none is set.
const DefaultCacheMaxBytes = 1 << 30

// Client pulls and pushes modules.
type Client struct {
	opts  Options
	creds credentials.Store
}

// New returns a Client with credentials from the usual docker config file.
func New(opts Options) (*Client, error) {
	if opts.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		opts.CacheDir = filepath.Join(base, "wasmrec", "oci")
	}
	if opts.CacheMaxBytes <= 0 {
		opts.CacheMaxBytes = DefaultCacheMaxBytes
	}
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("oci: reading the docker credentials: %w", err)
	}
	return &Client{opts: opts, creds: store}, nil
}

func (c *Client) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, format+"\n", args...)
	}
}

// PullOptions bound what a pull reads. The zero value bounds nothing but a manifest's size.
type PullOptions struct {
	// Root, if set, is the directory an image layout must lie in: the layout is opened inside
	// it, and a path or symbolic link that leads out of it is refused. Without it a layout is
	// confined to its own directory.
	Root string
	// MaxSize bounds the module layer, and each file read of a layout; 0: no bound.
	MaxSize int64
}

// maxManifest bounds a manifest read from a layout, as oras-go bounds one from a registry.
const maxManifest = 4 << 20

// target opens the repository or layout a reference names for writing, and returns the tag or
// digest in it.
func (c *Client) target(ctx context.Context, ref string) (oras.GraphTarget, string, error) {
	if dir, reference, ok := ParseLayout(ref); ok {
		store, err := orasoci.NewWithContext(ctx, dir)
		if err != nil {
			return nil, "", fmt.Errorf("oci: image layout %s: %w", dir, err)
		}
		return store, reference, nil
	}
	return c.remote(ref)
}

// source opens the repository or layout a reference names for reading only, and returns the
// tag or digest in it. A layout is never written: it is read inside opts.Root (or its own
// directory), regular files only, each at most opts.MaxSize. close releases it.
func (c *Client) source(ctx context.Context, ref string, opts PullOptions) (t oras.ReadOnlyGraphTarget, reference string, close func(), err error) {
	dir, reference, ok := ParseLayout(ref)
	if !ok {
		repo, reference, err := c.remote(ref)
		return repo, reference, func() {}, err
	}
	rootDir, inside := filepath.Clean(dir), "."
	if opts.Root != "" {
		rootDir = filepath.Clean(opts.Root)
		rel, err := filepath.Rel(rootDir, filepath.Clean(dir))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, "", nil, fmt.Errorf("oci: image layout %s is not inside %s", dir, opts.Root)
		}
		inside = rel
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, "", nil, fmt.Errorf("oci: image layout %s: %w", dir, err)
	}
	maxSize := opts.MaxSize
	if maxSize > 0 {
		maxSize = max(maxSize, maxManifest)
	}
	store, err := orasoci.NewFromFS(ctx, layoutFS{root: root, dir: inside, maxSize: maxSize})
	if err != nil {
		_ = root.Close()
		return nil, "", nil, fmt.Errorf("oci: image layout %s: %w", dir, err)
	}
	return store, reference, func() { _ = root.Close() }, nil
}

// remote opens the repository a registry reference names.
func (c *Client) remote(ref string) (oras.GraphTarget, string, error) {
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, "", fmt.Errorf("oci: %q is not a reference (registry/repository:tag or @digest, or oci:dir:tag): %w", ref, err)
	}
	repo.PlainHTTP = slices.Contains(c.opts.Insecure, repo.Reference.Registry)
	// A registry without the referrers API keeps an index of them under a tag; attaching a
	// signature replaces that index, and many registries refuse to delete the old one (deletes
	// are off by default in distribution). It is left behind, untagged.
	repo.SkipReferrersGC = true
	repo.Client = &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(c.creds)}
	reference := repo.Reference.Reference
	if reference == "" {
		reference = "latest"
	}
	return repo, reference, nil
}

// Resolve returns the digest of the manifest ref names now (a tag moves; a digest does not).
func (c *Client) Resolve(ctx context.Context, ref string, opts PullOptions) (string, error) {
	t, reference, done, err := c.source(ctx, ref, opts)
	if err != nil {
		return "", err
	}
	defer done()
	desc, err := t.Resolve(ctx, reference)
	if err != nil {
		return "", fmt.Errorf("oci: resolving %s: %w: check the reference, the registry's address and credentials, and --insecure for a plain-HTTP registry", ref, err)
	}
	return desc.Digest.String(), nil
}

// Module is a pulled plugin module.
type Module struct {
	Ref            string
	ManifestDigest string
	Digest         string // the wasm layer's, "sha256:..."
	Wasm           []byte
	Cached         bool // read from the on-disk cache, not the registry
}

// Pull fetches the wasm module ref names, within opts. The layer's digest is verified, from the
// registry and from the cache alike. A module already in the cache is not downloaded again, but
// only once ref's own repository or layout has said it holds that layer: the cache never
// answers for a source what the source itself does not serve. Only a layer that is a wasm
// module is kept in the cache.
func (c *Client) Pull(ctx context.Context, ref string, opts PullOptions) (*Module, error) {
	t, reference, done, err := c.source(ctx, ref, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	desc, err := t.Resolve(ctx, reference)
	if err != nil {
		return nil, fmt.Errorf("oci: resolving %s: %w: check the reference, the registry's address and credentials, and --insecure for a plain-HTTP registry", ref, err)
	}
	if desc.Size > maxManifest {
		return nil, fmt.Errorf("oci: the manifest of %s is %d bytes, over the limit of %d: it is not a plugin's", ref, desc.Size, maxManifest)
	}
	raw, err := content.FetchAll(ctx, t, desc)
	if err != nil {
		return nil, fmt.Errorf("oci: fetching the manifest of %s: %w", ref, err)
	}
	var manifest ocispec.Manifest
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return nil, fmt.Errorf("oci: the manifest of %s is not an OCI image manifest: %w", ref, err)
	}
	layer, err := wasmLayer(manifest)
	if err != nil {
		return nil, fmt.Errorf("oci: %s: %w", ref, err)
	}
	if opts.MaxSize > 0 && layer.Size > opts.MaxSize {
		return nil, fmt.Errorf("oci: %s: %w", ref, &TooLargeError{What: "the module layer " + layer.Digest.String(), Size: layer.Size, Limit: opts.MaxSize})
	}
	m := &Module{Ref: ref, ManifestDigest: desc.Digest.String(), Digest: layer.Digest.String()}
	if b, ok := c.cached(layer.Digest); ok {
		has, err := t.Exists(ctx, layer)
		if err != nil {
			return nil, fmt.Errorf("oci: asking %s for the module layer %s: %w", ref, layer.Digest, err)
		}
		if has {
			m.Wasm, m.Cached = b, true
			c.progress("%s: %s from the cache (%d bytes)", ref, layer.Digest, len(b))
			return m, nil
		}
		return nil, fmt.Errorf("oci: %s: the manifest names the module layer %s, which its repository does not hold: push the module again", ref, layer.Digest)
	}
	c.progress("%s: pulling %s (%d bytes)", ref, layer.Digest, layer.Size)
	if m.Wasm, err = c.fetch(ctx, t, layer, ref); err != nil {
		return nil, fmt.Errorf("oci: fetching the module layer %s of %s: %w", layer.Digest, ref, err)
	}
	if bytes.HasPrefix(m.Wasm, wasmMagic) {
		c.keep(layer.Digest, m.Wasm)
	}
	c.progress("%s: pulled %s", ref, layer.Digest)
	return m, nil
}

// wasmMagic opens every wasm module.
var wasmMagic = []byte("\x00asm")

// fetch reads a blob, checking its size and digest, and reports progress every 10% of a large
// one.
func (c *Client) fetch(ctx context.Context, t oras.ReadOnlyTarget, desc ocispec.Descriptor, ref string) ([]byte, error) {
	if c.opts.Progress == nil || desc.Size < 4<<20 {
		return content.FetchAll(ctx, t, desc)
	}
	rc, err := t.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, desc)
	buf := make([]byte, 0, desc.Size)
	chunk := make([]byte, 256<<10)
	next := desc.Size / 10
	for {
		n, err := vr.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) >= next && next > 0 {
			c.progress("%s: %d%% (%d of %d bytes)", ref, int64(len(buf))*100/desc.Size, len(buf), desc.Size)
			next += desc.Size / 10
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if err := vr.Verify(); err != nil {
		return nil, err
	}
	return buf, nil
}

func wasmLayer(m ocispec.Manifest) (ocispec.Descriptor, error) {
	var found []ocispec.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == MediaTypeLayer || l.MediaType == MediaTypeLayerV1 {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return ocispec.Descriptor{}, fmt.Errorf("no wasm layer (%s or %s) in the manifest: is it a wasm artifact?", MediaTypeLayer, MediaTypeLayerV1)
	}
	return ocispec.Descriptor{}, fmt.Errorf("%d wasm layers in the manifest: a plugin is one module", len(found))
}

func (c *Client) cachePath(d digest.Digest) string {
	return filepath.Join(c.opts.CacheDir, d.Algorithm().String(), d.Encoded())
}

// cached returns a module from the cache if it is there and still has its digest.
func (c *Client) cached(d digest.Digest) ([]byte, bool) {
	if c.opts.CacheDir == "-" || d.Validate() != nil {
		return nil, false
	}
	path := c.cachePath(d)
	b, err := os.ReadFile(path)
	if err != nil || d.Algorithm().FromBytes(b) != d {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now) // used lately: trimmed last
	return b, true
}

// Forget removes the module whose digest is d from the cache: a module the host refused.
func (c *Client) Forget(d string) {
	if c.opts.CacheDir == "-" || digest.Digest(d).Validate() != nil {
		return
	}
	_ = os.Remove(c.cachePath(digest.Digest(d)))
}

// trim removes the modules used least lately until the cache is within CacheMaxBytes.
func (c *Client) trim() {
	dir := filepath.Join(c.opts.CacheDir, digest.SHA256.String())
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type kept struct {
		path string
		size int64
		used time.Time
	}
	var all []kept
	var total int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		all = append(all, kept{filepath.Join(dir, e.Name()), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(all, func(a, b kept) int { return a.used.Compare(b.used) })
	for _, k := range all {
		if total <= c.opts.CacheMaxBytes {
			return
		}
		if os.Remove(k.path) == nil {
			total -= k.size
		}
	}
}

// CachedModule returns the module whose digest is d ("sha256:..."), if the cache has it: every
// module pulled, and every module kept with Keep.
func (c *Client) CachedModule(d string) ([]byte, bool) { return c.cached(digest.Digest(d)) }

// Keep puts a module in the cache under its digest, if it is not there already: a host keeps the
// module files that serve plugins with a rollout, so that after a restart it can load the
// version that served and roll the new one out from it.
func (c *Client) Keep(wasm []byte) { c.keep(digest.FromBytes(wasm), wasm) }

func (c *Client) keep(d digest.Digest, b []byte) {
	if c.opts.CacheDir == "-" {
		return
	}
	path := c.cachePath(d)
	if _, err := os.Stat(path); err == nil {
		return // kept already; cached checks its digest when it reads it
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pull-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	_ = os.Rename(tmp.Name(), path)
	c.trim()
}

// Push writes a module to ref in the CNCF layout: config application/vnd.wasm.config.v0+json
// (holding the plugin's manifest under "wasmrec.dev/manifest"), one application/wasm layer.
// It returns the manifest's digest.
//
// With sign, the manifest is pushed first by digest, then what sign returns for it (a
// signature, attached as a referrer of artifact type signedAs), and only then is the tag moved:
// a host following the tag never sees the new module before its signature.
func (c *Client) Push(ctx context.Context, wasm, pluginManifest []byte, ref string, sign ...Signer) (string, error) {
	t, reference, err := c.target(ctx, ref)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(reference, "sha256:") {
		return "", errors.New("oci: push to a tag, not a digest")
	}
	store := memory.New()
	layer := content.NewDescriptorFromBytes(MediaTypeLayer, wasm)
	config, err := json.Marshal(map[string]any{
		"architecture": "wasm", "os": "wasip1", "layerDigests": []string{layer.Digest.String()},
		"wasmrec.dev/manifest": json.RawMessage(pluginManifest),
	})
	if err != nil {
		return "", err
	}
	configDesc := content.NewDescriptorFromBytes(MediaTypeConfig, config)
	for _, b := range []struct {
		d ocispec.Descriptor
		b []byte
	}{{layer, wasm}, {configDesc, config}} {
		if err := store.Push(ctx, b.d, bytes.NewReader(b.b)); err != nil {
			return "", err
		}
	}
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		Layers: []ocispec.Descriptor{layer}, ConfigDescriptor: &configDesc,
	})
	if err != nil {
		return "", fmt.Errorf("oci: packing: %w", err)
	}
	c.progress("%s: pushing %s (%d bytes)", ref, layer.Digest, len(wasm))
	failed := func(err error) error {
		return fmt.Errorf("oci: pushing to %s: %w: check the registry's address and credentials, and --insecure for a plain-HTTP registry", ref, err)
	}
	if err := oras.CopyGraph(ctx, store, t, desc, oras.DefaultCopyGraphOptions); err != nil {
		return "", failed(err)
	}
	for _, s := range sign {
		blob, err := s.Sign(ctx, Repository(ref), desc.Digest.String())
		if err != nil {
			return "", fmt.Errorf("oci: %s: %w", ref, err)
		}
		d, err := c.attach(ctx, t, desc, s.ArtifactType, blob, s.Annotations)
		if err != nil {
			return "", failed(err)
		}
		c.progress("%s: attached %s %s", ref, s.ArtifactType, d)
	}
	if err := t.Tag(ctx, desc, reference); err != nil {
		return "", failed(err)
	}
	c.progress("%s: pushed, manifest %s", ref, desc.Digest)
	return desc.Digest.String(), nil
}

// A Signer signs a module's manifest as it is pushed.
type Signer struct {
	ArtifactType string            // of what Sign returns, attached as a referrer
	Annotations  map[string]string // of the referrer's manifest
	// Sign signs the manifest of digest in repository name.
	Sign func(ctx context.Context, name, digest string) ([]byte, error)
}

// Repository is ref less its tag or digest: what a signature names as its subject.
func Repository(ref string) string {
	if i := strings.LastIndex(ref, "@"); i > 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// Attach attaches blob to the manifest subject ("sha256:...") in ref's repository, as an
// artifact of artifactType that refers to it (an OCI 1.1 referrer; on a registry without the
// referrers API, oras-go keeps the referrers tag index those registries use). It returns the
// artifact's manifest digest.
func (c *Client) Attach(ctx context.Context, ref, subject, artifactType string, blob []byte, annotations map[string]string) (string, error) {
	t, _, err := c.target(ctx, ref)
	if err != nil {
		return "", err
	}
	desc, err := t.Resolve(ctx, subject)
	if err != nil {
		return "", fmt.Errorf("oci: resolving %s in %s: %w", subject, ref, err)
	}
	return c.attach(ctx, t, desc, artifactType, blob, annotations)
}

func (c *Client) attach(ctx context.Context, t oras.GraphTarget, subject ocispec.Descriptor, artifactType string, blob []byte, annotations map[string]string) (string, error) {
	layer := content.NewDescriptorFromBytes(artifactType, blob)
	if err := t.Push(ctx, layer, bytes.NewReader(blob)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return "", err
	}
	desc, err := oras.PackManifest(ctx, t, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{
		Layers: []ocispec.Descriptor{layer}, Subject: &subject, ManifestAnnotations: annotations,
	})
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// maxReferrer bounds what Referrers reads of one artifact, and maxReferrers how many it reads.
const (
	maxReferrer  = 1 << 20
	maxReferrers = 16
)

// Referrers returns what the artifacts of artifactType that refer to the manifest subject in
// ref's repository hold: the first layer of each, at most maxReferrers of them.
func (c *Client) Referrers(ctx context.Context, ref, subject, artifactType string) ([][]byte, error) {
	t, _, done, err := c.source(ctx, ref, PullOptions{MaxSize: maxReferrer})
	if err != nil {
		return nil, err
	}
	defer done()
	desc, err := t.Resolve(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("oci: resolving %s in %s: %w", subject, ref, err)
	}
	found, err := registry.Referrers(ctx, t, desc, artifactType)
	if err != nil {
		return nil, fmt.Errorf("oci: listing the referrers of %s in %s: %w", subject, ref, err)
	}
	var out [][]byte
	for _, d := range found[:min(len(found), maxReferrers)] {
		if d.Size > maxReferrer {
			continue
		}
		raw, err := content.FetchAll(ctx, t, d)
		if err != nil {
			return nil, fmt.Errorf("oci: fetching the %s %s of %s: %w", artifactType, d.Digest, ref, err)
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Layers) == 0 || m.Layers[0].Size > maxReferrer {
			continue
		}
		b, err := content.FetchAll(ctx, t, m.Layers[0])
		if err != nil {
			return nil, fmt.Errorf("oci: fetching the %s %s of %s: %w", artifactType, d.Digest, ref, err)
		}
		out = append(out, b)
	}
	return out, nil
}
