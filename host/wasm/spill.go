package wasm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// spilledDir is where, under the engine's cache directory, the bytes of modules whose code was
// let go wait to be loaded again: a Go guest is megabytes, and a host of many idle plugins of
// different modules would hold every one of them in memory (16 MB each for a typed Go guest,
// more than the rest of what an idle plugin holds).
const spilledDir = "modules"

// spill writes wasm, the module of digest, to the cache directory, unless it is there already,
// and says whether the caller may let go of its bytes: not with no cache directory, nor when
// the write fails (the bytes then stay in memory).
func (e *Engine) spill(digest string, wasm []byte) bool {
	if e.cacheDir == "" || wasm == nil {
		return false
	}
	path := e.spillPath(digest)
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, wasm) {
		return true
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".spill-*")
	if err != nil {
		return false
	}
	_, err = tmp.Write(wasm)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return false
	}
	return true
}

// unspill reads back what spill wrote, checking it is still the module it was.
func (e *Engine) unspill(digest string) ([]byte, error) {
	path := e.spillPath(digest)
	b, err := os.ReadFile(path)
	if err == nil && digestOf(b) != digest {
		err = fmt.Errorf("it is no longer the module (%s), it was changed", ShortDigest(digestOf(b)))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the module's bytes back from %s, where they were kept while its code was let go: %w (the plugin starts no instance until it is loaded anew: change its module, or restart the host)", path, err)
	}
	return b, nil
}

func (e *Engine) spillPath(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(e.cacheDir, spilledDir, hex+".wasm")
}
