package recording

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
)

// WriteBundle writes to w, as a tar, what replaying the recording of that digest in dir (a
// plugin's) needs: the recording, the steps of its instance up to its reconcile, and its
// module if dir keeps it. Read into a directory with ReadBundle, it replays as from the store.
func WriteBundle(w io.Writer, dir, digest string) error {
	if _, _, err := Load(dir, digest); err != nil { // all is there, and whole
		return err
	}
	l, err := find(dir, digest)
	if err != nil {
		return err
	}
	inst := filepath.Base(l.dir)
	steps, err := docBytes(filepath.Join(l.dir, stepsLog), 0, l.Before+1)
	if err != nil {
		return err
	}
	rec, err := docBytes(filepath.Join(l.dir, recordingsLog), l.index, l.index+1)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{{path.Join(inst, stepsLog), steps}, {path.Join(inst, recordingsLog), rec}}
	// The module travels compressed, as a store of format v1 kept it: a bundle is made when
	// asked for, where a store writes its modules on a reconcile's path.
	if m, err := LoadModule(dir, l.Module); err == nil {
		files = append(files, struct {
			name string
			data []byte
		}{compressedModuleFile(l.Module), compress(nil, m)})
	}
	tw := tar.NewWriter(w)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// bundleName is a name a bundle may hold.
var bundleName = regexp.MustCompile(`^(i-[0-9a-f]{1,64}/(steps|recordings)\.log|module-[0-9a-f]{64}\.wasm(\.zst)?)$`)

// ReadBundle adds the recording of a bundle (WriteBundle) to dir, a plugin's recordings
// directory, reading at most max bytes: bundles of many recordings read into one directory
// make a store of them, as the host's. A name a bundle does not hold is refused, and so is
// anything but a regular file.
func ReadBundle(r io.Reader, dir string, max int64) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the recording: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !bundleName.MatchString(h.Name) {
			return fmt.Errorf("the recording holds %q, which a recording does not", h.Name)
		}
		if total += h.Size; total > max {
			return fmt.Errorf("the recording is more than %d bytes", max)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return fmt.Errorf("reading the recording: %w", err)
		}
		if err := mergeFile(p, b); err != nil {
			return err
		}
	}
}

// mergeFile adds b to the file at p: an instance's steps (each bundle holds a prefix of them:
// the longer is kept), its recordings (those not there yet are appended), a module.
func mergeFile(p string, b []byte) error {
	have, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeFile(p, b)
	case err != nil:
		return err
	}
	switch filepath.Base(p) {
	case stepsLog:
		if len(b) <= len(have) {
			return nil
		}
		return writeFile(p, b)
	case recordingsLog:
		if bytes.Contains(have, b) {
			return nil
		}
		return writeFile(p, append(have, b...))
	}
	return nil // a module: named by its digest
}
