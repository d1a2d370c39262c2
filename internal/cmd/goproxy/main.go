package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/wasmrec/wasmrec/internal/release"
)

func main() {
	out := flag.String("o", "bin/goproxy", "the proxy's folder (emptied first)")
	root := flag.String("C", ".", "the repository's root")
	flag.Parse()
	if err := write(*out, *root); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
}

func write(out, root string) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for _, m := range []struct{ path, dir string }{
		{release.ABIModule, release.ABIDir},
		{release.SDKModule, release.SDKDir},
	} {
		if err := writeModule(out, module.Version{Path: m.path, Version: release.Version}, filepath.Join(root, m.dir)); err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
	}
	return nil
}

func writeModule(out string, mv module.Version, dir string) error {
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(vdir, mv.Version+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"list":               []byte(mv.Version + "\n"),
		mv.Version + ".info": info,
		mv.Version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
