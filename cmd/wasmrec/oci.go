package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/wasm"
)

func newPushCommand(stdout io.Writer) *cobra.Command {
	o := &hostOptions{}
	var signWith string
	var sign bool
	cmd := &cobra.Command{
		Use:   "push FILE REF",
		Short: "Push a plugin module to an OCI registry (CNCF wasm layout, manifest in the config)",
		Example: `  wasmrec push bin/plugins/app.wasm registry.example/plugins/app:v1
  wasmrec push app.wasm localhost:5000/app:dev --insecure localhost:5000
  wasmrec push app.wasm oci:./layout:v1
  wasmrec push app.wasm registry.example/plugins/app:v2 --sign --key release.key`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			wasmBytes, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			// Refuse what the host would refuse, and carry the manifest in the config.
			manifest, err := readManifest(cmd.Context(), wasmBytes)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			var signers []oci.Signer
			if sign != (signWith != "") {
				return errors.New("--sign and --key go together: --sign --key FILE signs the module with the private key in FILE")
			}
			if sign {
				key, err := signature.ReadKey(signWith)
				if err != nil {
					return fmt.Errorf("--key: %w", err)
				}
				signers = append(signers, oci.Signer{ArtifactType: signature.ArtifactType, Annotations: signature.Annotations(), Sign: key.SignManifest})
				defer fmt.Fprintf(stdout, "signed with key %s\n", key.Fingerprint())
			}
			c, err := o.ociClient(stdout)
			if err != nil {
				return err
			}
			digest, err := c.Push(cmd.Context(), wasmBytes, manifest, args[1], signers...)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "pushed %s: %s\n", args[1], digest)
			return nil
		},
	}
	cmd.Flags().BoolVar(&sign, "sign", false, "sign the module (with --key) before the tag moves to it: a Sigstore bundle attached as an OCI referrer")
	cmd.Flags().StringVar(&signWith, "key", "", "the PEM private key (ECDSA P-256 or Ed25519, unencrypted PKCS #8) --sign signs with")
	o.addOCIFlags(cmd)
	return cmd
}

func newPullCommand(stdout io.Writer) *cobra.Command {
	o := &hostOptions{}
	var out string
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull a plugin module from an OCI registry or image layout",
		Example: `  wasmrec pull registry.example/plugins/app:v1 --out app.wasm
  wasmrec pull oci:./layout:v1 --out app.wasm`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.ociClient(stdout)
			if err != nil {
				return err
			}
			m, err := c.Pull(cmd.Context(), args[0], oci.PullOptions{})
			if err != nil {
				return err
			}
			if out == "" {
				out = "plugin.wasm"
			}
			if err := os.WriteFile(out, m.Wasm, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "pulled %s (manifest %s, module %s) to %s\n", args[0], m.ManifestDigest, m.Digest, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the module file to write (default plugin.wasm)")
	o.addOCIFlags(cmd)
	return cmd
}

func readManifest(ctx context.Context, wasmBytes []byte) ([]byte, error) {
	e, err := wasm.NewEngine(wasm.EngineOptions{})
	if err != nil {
		return nil, err
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, wasmBytes, wasm.Options{Name: "push"})
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	return json.Marshal(m.Manifest())
}
