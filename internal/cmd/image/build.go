package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	nonroot = 65532
	// binaryPath is where the image holds bin/wasmrec, its entrypoint.
	binaryPath = "/usr/local/bin/wasmrec"
	pluginsDir = "/plugins/"
	certsPath  = "/etc/ssl/certs/ca-certificates.crt"
	pathEnv    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// As distroless writes them; root's and nobody's entries are for tools that name owners.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// build assembles the image from o's inputs.
func build(o options) (v1.Image, error) {
	arch, err := staticLinuxArch(o.binary)
	if err != nil {
		return nil, err
	}
	if o.arch != "" && o.arch != arch {
		return nil, fmt.Errorf("%s is built for %s, not %s: build it with GOARCH=%s", o.binary, arch, o.arch, o.arch)
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, err
	}

	base := []entry{
		dir("etc/", 0o755, 0),
		file("etc/group", 0o644, 0, []byte(group)),
		file("etc/passwd", 0o644, 0, []byte(passwd)),
		dir("home/", 0o755, 0),
		dir("home/nonroot/", 0o700, nonroot),
		dir("tmp/", 0o1777, 0),
		dir("var/", 0o755, 0),
		dir("var/cache/", 0o755, 0),
		dir("var/cache/wasmrec/", 0o755, nonroot),
	}
	if o.caCerts != "" {
		pem, err := os.ReadFile(o.caCerts)
		if err != nil {
			return nil, fmt.Errorf("the CA certificates (-ca-certs): %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA certificates (-ca-certs): %s holds no PEM certificate", o.caCerts)
		}
		base = append(base, dir("etc/ssl/", 0o755, 0), dir("etc/ssl/certs/", 0o755, 0), file(certsPath[1:], 0o644, 0, pem))
	}

	modules, err := filepath.Glob(filepath.Join(o.plugins, "*.wasm"))
	if err != nil {
		return nil, err
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("no plugins (*.wasm) in %s: build them with make plugins", o.plugins)
	}
	plugins := []entry{dir(pluginsDir[1:], 0o755, 0)}
	for _, m := range modules {
		b, err := os.ReadFile(m)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, file(pluginsDir[1:]+filepath.Base(m), 0o644, 0, b))
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range []struct {
		what    string
		entries []entry
	}{
		{"a root made from scratch: /etc/passwd and /etc/group (nonroot 65532), CA certificates, /tmp, /var/cache/wasmrec", base},
		{"the example plugins under " + pluginsDir, plugins},
		{"bin/wasmrec at " + binaryPath, []entry{dir("usr/", 0o755, 0), dir("usr/local/", 0o755, 0), dir("usr/local/bin/", 0o755, 0), file(binaryPath[1:], 0o755, 0, bin)}},
	} {
		layer, err := newLayer(l.entries, o.epoch)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: o.epoch}, CreatedBy: "wasmrec internal/cmd/image: " + l.what}})
		if err != nil {
			return nil, err
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		Env:        []string{pathEnv},
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.source":   o.source,
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// GOARCH's names of ELF machines.
var elfArchs = map[elf.Machine]string{
	elf.EM_X86_64:    "amd64",
	elf.EM_AARCH64:   "arm64",
	elf.EM_386:       "386",
	elf.EM_ARM:       "arm",
	elf.EM_RISCV:     "riscv64",
	elf.EM_S390:      "s390x",
	elf.EM_PPC64:     "ppc64le",
	elf.EM_LOONGARCH: "loong64",
}

// staticLinuxArch returns the GOARCH of the binary at path, or why the image cannot run it.
func staticLinuxArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux binary (build it with make build): %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked and the image has no libc: build it with CGO_ENABLED=0, as make build does", path)
		}
	}
	arch, ok := elfArchs[f.Machine]
	if !ok || f.Class != elf.ELFCLASS64 && arch != "386" && arch != "arm" {
		return "", fmt.Errorf("%s is for %s (%s), which this tool does not name", path, f.Machine, f.Class)
	}
	if arch == "ppc64le" && f.ByteOrder == binary.BigEndian {
		arch = "ppc64"
	}
	return arch, nil
}

// entry is a file or a folder (its name ends in /) of a layer, named without the leading /.
type entry struct {
	name string
	mode int64
	uid  int
	data []byte
}

func dir(name string, mode int64, uid int) entry { return entry{name: name, mode: mode, uid: uid} }

func file(name string, mode int64, uid int, data []byte) entry {
	return entry{name: name, mode: mode, uid: uid, data: data}
}

// newLayer writes entries in path order (a folder before what it holds), each with the same
// time, its owner as uid and gid and no owner names, then gzips the tar with no name and no
// time in its header.
func newLayer(entries []entry, mtime time.Time) (*memLayer, error) {
	entries = append([]entry(nil), entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i, e := range entries {
		if i > 0 && entries[i-1].name == e.name {
			return nil, fmt.Errorf("%s twice in a layer", e.name)
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tb.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &memLayer{tar: tb.Bytes(), gz: gz.Bytes(), diffID: sha(tb.Bytes()), digest: sha(gz.Bytes())}, nil
}

func sha(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// memLayer is a layer held in memory, compressed once.
type memLayer struct {
	tar, gz        []byte
	diffID, digest v1.Hash
}

func (l *memLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *memLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *memLayer) Size() (int64, error)     { return int64(len(l.gz)), nil }
func (l *memLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}

func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}

func (l *memLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}
