package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/release"
)

// version is stamped by the Makefile (-ldflags -X main.version=...).
var version = "devel"

// buildInfo is what `wasmrec version` prints.
type buildInfo struct {
	Version    string `json:"version"`
	Revision   string `json:"revision"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
	ABIVersion int    `json:"abiVersion"`
	SDKVersion string `json:"sdkVersion"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, ABIVersion: abi.Version, SDKVersion: release.Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version // go install ...@vX.Y.Z
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				b.Revision = s.Value
			}
		}
	}
	return b
}

func (b buildInfo) String() string {
	rev := ""
	if b.Revision != "unknown" {
		rev = "revision " + b.Revision + ", "
	}
	return fmt.Sprintf("wasmrec %s (%s%s, %s; plugin ABI v%d, SDK %s)", b.Version, rev, b.GoVersion, b.Platform, b.ABIVersion, b.SDKVersion)
}

func newVersionCommand(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build, the plugin ABI it speaks and the SDK release it scaffolds",
		Example: `  wasmrec version
  wasmrec version -o json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b := currentBuild()
			return printAs(stdout, output, b, func(w io.Writer) { fmt.Fprintln(w, b) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	return cmd
}
