package oci

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ParseLayout splits an image-layout reference, "oci:DIR:TAG", "oci:DIR@DIGEST" or "oci:DIR",
// into its directory and the tag or digest in it ("latest" when it names none). ok is false for
// anything that is not an image-layout reference. It is the one reading of such a reference:
// the host's check of where a module may come from and the pull itself both use it.
func ParseLayout(ref string) (dir, reference string, ok bool) {
	path, ok := strings.CutPrefix(ref, LayoutPrefix)
	if !ok || strings.HasPrefix(path, "//") { // "oci://" is a registry
		return "", "", false
	}
	dir = path
	if i := strings.LastIndex(path, "@"); i > 0 && !strings.Contains(path[i:], "/") {
		dir, reference = path[:i], path[i+1:]
	} else if i := strings.LastIndex(path, ":"); i > 0 && !strings.Contains(path[i:], "/") {
		dir, reference = path[:i], path[i+1:]
	}
	if reference == "" {
		reference = "latest"
	}
	return dir, reference, true
}

// OpenFile opens name for reading only if it is a regular file of at most maxSize bytes (0: any
// size). It never blocks on a FIFO or a device: it opens without waiting and refuses what is
// not a regular file. With root set, name is opened inside root: ".." and symbolic links that
// lead out of it are refused.
func OpenFile(root *os.Root, name string, maxSize int64) (*os.File, error) {
	var f *os.File
	var err error
	if root != nil {
		f, err = root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		if root != nil && strings.Contains(err.Error(), "path escapes from parent") {
			return nil, fmt.Errorf("%s leads out of %s (a symbolic link, or ..): a module is read inside its source directory only; put the module file itself there", name, root.Name())
		}
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file but %s: a module is read from a regular file only; put the module file itself there", name, fileType(fi.Mode()))
	case maxSize > 0 && fi.Size() > maxSize:
		err = &TooLargeError{What: name, Size: fi.Size(), Limit: maxSize}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// TooLargeError is a module, a layer or a file of a layout over the size the host allows.
type TooLargeError struct {
	What        string
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %s (%d bytes), over the limit of %s (%d bytes: the plugin's maxModuleSize, which is a plugin object's spec.maxModuleSize if set, else the operator's pluginObjects.maxModuleSize, else the host config's): make the module smaller, or ask the operator; an object's own maxModuleSize may only lower the operator's", e.What, mib(e.Size), e.Size, mib(e.Limit), e.Limit)
}

// mib is n bytes in MiB, as a person reads a size.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// fileType names what a mode says a file is.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// layoutFS reads an image layout inside a root, regular files only, each at most maxSize bytes:
// what the host reads of a layout cannot lead it out of the directory it was given, block it,
// or make it read without bound.
type layoutFS struct {
	root    *os.Root
	dir     string // the layout's directory inside root ("." for root itself)
	maxSize int64
}

func (l layoutFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := OpenFile(l.root, filepath.Join(l.dir, filepath.FromSlash(name)), l.maxSize)
	if err != nil {
		return nil, err
	}
	return f, nil
}
