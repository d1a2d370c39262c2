package main

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// printAs writes v as -o asks: "json", "yaml", or "text" (the command's own printer).
func printAs(w io.Writer, output string, v any, text func(io.Writer)) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "text", "":
		text(w)
		return nil
	}
	return fmt.Errorf("--output %q: use text, json or yaml", output)
}
