package main

import (
	"fmt"
	"os"

	"github.com/wasmrec/wasmrec/internal/build"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: wasmopt MODULE (optimized in place)")
		os.Exit(2)
	}
	if err := build.Optimize(os.Args[1], os.Args[1], build.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "wasmopt: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
