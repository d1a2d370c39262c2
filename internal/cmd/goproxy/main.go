package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/wasmrec/wasmrec/internal/sdkproxy"
)

func main() {
	out := flag.String("o", "internal/sdkproxy/modules", "the proxy's folder (each module's folder in it is replaced)")
	root := flag.String("C", ".", "the repository's root")
	flag.Parse()
	if err := sdkproxy.Write(*out, *root); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
}
