package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/wasmrec/wasmrec/internal/sdkproxy"
)

func main() {
	out := flag.String("o", "internal/sdkproxy/modules", "the proxy's folder (each module's folder in it is replaced)")
	root := flag.String("C", ".", "the repository's root")
	dropStale := flag.Bool("drop-stale", true, "remove from the go command's module cache this version of the modules if it holds other contents than the tree's")
	flag.Parse()
	if err := sdkproxy.Write(*out, *root); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
	if !*dropStale {
		return
	}
	gomodcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "goproxy: go env GOMODCACHE:", err)
		os.Exit(1)
	}
	dropped, err := sdkproxy.DropStale(strings.TrimSpace(string(gomodcache)), *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goproxy: removing a stale SDK from the module cache:", err)
		os.Exit(1)
	}
	for _, p := range dropped {
		fmt.Printf(">> the module cache held %s at this tree's version with other contents (an earlier tree's): removed it. The go command also keeps what it read of a module's packages by the module's path, not its contents: if a build then says `could not import`, run `go clean -cache`, or give the modules a new version (internal/release)\n", p)
	}
}
