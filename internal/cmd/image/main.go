package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

type options struct {
	out, binary, plugins, caCerts, arch string
	version, revision, source           string
	epoch                               time.Time
	push, repo, deploy                  string
	insecure                            bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "o", "bin/image", "the OCI image layout's folder (emptied first)")
	flag.StringVar(&o.binary, "binary", "bin/wasmrec", "the wasmrec binary: static, for Linux")
	flag.StringVar(&o.plugins, "plugins", "bin/plugins", "the folder whose *.wasm go under /plugins/")
	flag.StringVar(&o.caCerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", `the CA certificates (PEM) put at /etc/ssl/certs/ca-certificates.crt ("" for none)`)
	flag.StringVar(&o.arch, "arch", "", "the architecture the image must have, as GOARCH names it (default: the binary's)")
	flag.StringVar(&o.version, "version", "", "the org.opencontainers.image.version label (default: git describe --tags --always --dirty)")
	flag.StringVar(&o.revision, "revision", "", "the org.opencontainers.image.revision label (default: git rev-parse HEAD)")
	flag.StringVar(&o.source, "source", "https://github.com/wasmrec/wasmrec", "the org.opencontainers.image.source label")
	epoch := flag.String("epoch", "", "the time of every file, the config and the history, in seconds since 1970 (default: $SOURCE_DATE_EPOCH, or else the last commit's time)")
	flag.StringVar(&o.push, "push", "", "push the image to this reference (registry/repository:tag)")
	flag.BoolVar(&o.insecure, "insecure", false, "allow plain HTTP to the -push registry when it is not on a loopback address")
	flag.StringVar(&o.repo, "repo", "", "the repository the manifests in -o/deploy/ name the image in (default: -push's); for a layout you push yourself")
	flag.StringVar(&o.deploy, "deploy", "deploy", "the manifests copied into -o/deploy/, their `image: WASMREC_IMAGE` set by digest")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := o.defaults(*epoch); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// defaults fills the labels and the time from git and SOURCE_DATE_EPOCH where no flag gave them.
func (o *options) defaults(epoch string) error {
	var err error
	if o.version == "" {
		if o.version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
			return fmt.Errorf("the version label (or pass -version): %w", err)
		}
	}
	if o.revision == "" {
		if o.revision, err = git("rev-parse", "HEAD"); err != nil {
			return fmt.Errorf("the revision label (or pass -revision): %w", err)
		}
	}
	what := "-epoch"
	if epoch == "" {
		epoch, what = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return fmt.Errorf("the last commit's time (or set SOURCE_DATE_EPOCH): %w", err)
		}
		what = "the last commit's time"
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || secs < 0 {
		return fmt.Errorf("%s is %q, not a count of seconds since 1970", what, epoch)
	}
	o.epoch = time.Unix(secs, 0).UTC()
	return nil
}

func git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// run builds the image, writes the layout, pushes it and writes the manifests as o says, and
// prints the image's digest on stdout (after the repository when there is one), the rest on log.
func run(ctx context.Context, o options, stdout, log io.Writer) error {
	var tag name.Tag
	if o.push != "" {
		var err error
		if tag, err = pushRef(o.push, o.insecure); err != nil {
			return fmt.Errorf("-push: %w", err)
		}
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if err := writeLayout(o.out, img); err != nil {
		return fmt.Errorf("writing the layout %s: %w", o.out, err)
	}
	if err := describe(log, o.out, img); err != nil {
		return err
	}
	repo := o.repo
	if o.push != "" {
		fmt.Fprintf(log, "pushing it to %s\n", o.push)
		ref, err := push(ctx, img, tag, o.insecure)
		if err != nil {
			return fmt.Errorf("pushing to %s: %w", o.push, err)
		}
		if repo == "" {
			repo = ref.Context().Name()
		}
	}
	if repo == "" {
		fmt.Fprintf(log, "no -push or -repo: %s/deploy/ is not written, as no registry holds the image\n", o.out)
		fmt.Fprintln(stdout, d)
		return nil
	}
	image := repo + "@" + d.String()
	if err := writeManifests(o.deploy, filepath.Join(o.out, "deploy"), image); err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s/deploy/: %s/*.yaml with the Deployment's image %s\n", o.out, o.deploy, image)
	fmt.Fprintln(stdout, image)
	return nil
}

// writeLayout writes img as the one image of an OCI image layout in dir, emptied first. It
// refuses to empty a folder that is not a layout.
func writeLayout(dir string, img v1.Image) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("%s holds files but no oci-layout: not emptying it", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.WriteImage(img); err != nil {
		return err
	}
	// The index names the image with its platform; AppendImage would give it the config's media
	// type as an artifactType, which is for artifacts, not images.
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if err := p.AppendDescriptor(v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest, Platform: cf.Platform()}); err != nil {
		return err
	}
	// Layers are written through temporary files (0600): readable by all, as the rest is, so
	// that another user's tool or a registry can copy the layout.
	return filepath.WalkDir(filepath.Join(dir, "blobs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o644)
	})
}

// describe says where the image is, for which platform, and how large it is.
func describe(w io.Writer, dir string, img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var packed, unpacked int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return err
		}
		packed += n
		if m, ok := l.(*memLayer); ok {
			unpacked += int64(len(m.tar))
		}
	}
	fmt.Fprintf(w, "wrote the image (%s/%s, %d layers, %.1f MB compressed, %.1f MB unpacked) to the OCI layout %s\n",
		cf.OS, cf.Architecture, len(layers), float64(packed)/1e6, float64(unpacked)/1e6, dir)
	return nil
}
