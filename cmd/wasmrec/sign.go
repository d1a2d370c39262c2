package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/signature"
)

// moduleArg is where a sign or verify command's module is: a file that exists, or else an OCI
// reference (with or without "oci://").
func moduleArg(arg string) (file, ref string, err error) {
	if r, ok := strings.CutPrefix(arg, "oci://"); ok {
		return "", r, nil
	}
	if _, err := os.Stat(arg); err == nil {
		return arg, "", nil
	}
	if strings.HasSuffix(arg, ".wasm") || strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "/") {
		return "", "", fmt.Errorf("%s: no such module file (a module in a registry is registry/repository:tag, or oci://...)", arg)
	}
	return "", arg, nil
}

func newKeygenCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "keygen NAME",
		Short: "Make a key pair that signs plugin modules: NAME.key (private, keep it secret) and NAME.pub",
		Example: `  wasmrec keygen release
  wasmrec push app.wasm registry.example/plugins/app:v1 --sign --key release.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return err
			}
			der, err := x509.MarshalPKCS8PrivateKey(k)
			if err != nil {
				return err
			}
			pubDER, err := x509.MarshalPKIXPublicKey(k.Public())
			if err != nil {
				return err
			}
			priv, pub := args[0]+".key", args[0]+".pub"
			for _, f := range []string{priv, pub} {
				if _, err := os.Stat(f); err == nil {
					return fmt.Errorf("%s exists: keygen writes new files only; remove it or choose another name", f)
				}
			}
			if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
				return err
			}
			if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
				return err
			}
			fp, err := signature.Fingerprint(k.Public())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote %s and %s (key %s): give %s to the hosts, in signatures.keys\n", priv, pub, fp, pub)
			return nil
		},
	}
}

func newSignCommand(stdout io.Writer) *cobra.Command {
	o := &hostOptions{}
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign MODULE --key FILE",
		Short: "Sign a plugin module: a file (writes FILE.sigstore.json beside it) or one in a registry (attaches a Sigstore bundle to its manifest)",
		Example: `  wasmrec sign app.wasm --key release.key
  wasmrec sign registry.example/plugins/app:v1 --key release.key`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return errors.New("--key is required: the PEM private key to sign with (wasmrec keygen makes one)")
			}
			key, err := signature.ReadKey(keyFile)
			if err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			ctx := cmd.Context()
			file, ref, err := moduleArg(args[0])
			if err != nil {
				return err
			}
			if file != "" {
				wasmBytes, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				b, err := key.SignBlob(ctx, file, wasmBytes)
				if err != nil {
					return err
				}
				replaced := ""
				if _, err := os.Stat(file + signature.FileSuffix); err == nil {
					replaced = " (it replaces the signature there: a module file carries one)"
				}
				if err := os.WriteFile(file+signature.FileSuffix, b, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "signed %s with key %s: %s%s\n", file, key.Fingerprint(), file+signature.FileSuffix, replaced)
				return nil
			}
			c, err := o.ociClient(nil)
			if err != nil {
				return err
			}
			digest, err := c.Resolve(ctx, ref, oci.PullOptions{})
			if err != nil {
				return err
			}
			b, err := key.SignManifest(ctx, oci.Repository(ref), digest)
			if err != nil {
				return err
			}
			d, err := c.Attach(ctx, ref, digest, signature.ArtifactType, b, signature.Annotations())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "signed %s (manifest %s) with key %s: attached %s\n", ref, digest, key.Fingerprint(), d)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "the PEM private key (ECDSA P-256 or Ed25519, unencrypted PKCS #8) to sign with")
	o.addOCIFlags(cmd)
	return cmd
}

func newVerifyCommand(stdout io.Writer) *cobra.Command {
	o := &hostOptions{}
	var (
		policy      signature.Policy
		identities  []string
		issuer      string
		trustedRoot string
	)
	cmd := &cobra.Command{
		Use:   "verify MODULE (--key FILE | --identity SUBJECT --issuer URL --trusted-root FILE)",
		Short: "Check a plugin module's signatures as a host does: a file (and FILE.sigstore.json) or one in a registry",
		Example: `  wasmrec verify app.wasm --key release.pub
  wasmrec verify registry.example/plugins/app:v1 --key release.pub
  wasmrec verify registry.example/plugins/app:v1 --trusted-root trusted_root.json \
      --issuer https://token.actions.githubusercontent.com \
      --identity https://github.com/team/app/.github/workflows/release.yml@refs/heads/main`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range identities {
				if issuer == "" {
					return errors.New("--identity needs --issuer: the OIDC issuer that vouched for it")
				}
				policy.Identities = append(policy.Identities, signature.Identity{Subject: id, Issuer: issuer})
			}
			if policy.IsZero() {
				return errors.New("say who may have signed it: --key FILE (a public key), or --identity and --issuer with --trusted-root")
			}
			opts := signature.Options{KeyFiles: true}
			if trustedRoot != "" {
				tr, err := signature.LoadTrustedRoot(trustedRoot)
				if err != nil {
					return err
				}
				opts.TrustedRoot = tr
			}
			checker, err := policy.Compile(opts)
			if err != nil {
				return fmt.Errorf("the signers given (--key, --identity): %w", err)
			}
			ctx := cmd.Context()
			file, ref, err := moduleArg(args[0])
			if err != nil {
				return err
			}
			var c *oci.Client
			var wasmBytes []byte
			var digest string
			if file != "" {
				if wasmBytes, err = os.ReadFile(file); err != nil {
					return err
				}
				ref = file
			} else {
				if c, err = o.ociClient(nil); err != nil {
					return err
				}
				if digest, err = c.Resolve(ctx, ref, oci.PullOptions{}); err != nil {
					return err
				}
			}
			bundles, sum, err := signature.Find(ctx, c, ref, digest, wasmBytes)
			if err != nil {
				return err
			}
			by, err := checker.Check(bundles, sum)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprintf(stdout, "%s: signed by %s\n", args[0], by)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&policy.Keys, "key", nil, "a PEM public key file that may have signed it (repeat for several)")
	cmd.Flags().StringSliceVar(&identities, "identity", nil, "a keyless signer's subject (an e-mail or a workflow URI) that may have signed it")
	cmd.Flags().StringVar(&issuer, "issuer", "", "the OIDC issuer of --identity")
	cmd.Flags().StringVar(&trustedRoot, "trusted-root", "", "sigstore's trusted_root.json to check keyless signatures under")
	o.addOCIFlags(cmd)
	return cmd
}
