package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is stamped by the Makefile (-ldflags -X main.version=...).
var version = "devel"

func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			revision := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						revision = s.Value
					}
				}
			}
			_, err := fmt.Fprintf(stdout, "wasmrec %s (revision %s, %s, %s/%s)\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
