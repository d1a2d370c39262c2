package release

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// Every module of the repository that requires abi or sdk/go names Version, and go.work points
// that version at this tree: a scaffold from `wasmrec new` then builds against what this tree
// tests.
func TestModulesRequireVersion(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	replaced := map[string]string{}
	for _, r := range work.Replace {
		replaced[r.Old.Path] = r.Old.Version
	}
	for _, m := range []string{ABIModule, SDKModule} {
		if replaced[m] != Version {
			t.Errorf("go.work replaces %s at %q, want %s", m, replaced[m], Version)
		}
	}
	checked := 0
	for _, use := range work.Use {
		path := filepath.Join(root, use.Path, "go.mod")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(path, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Require {
			if (r.Mod.Path == ABIModule || r.Mod.Path == SDKModule) && r.Mod.Version != Version {
				t.Errorf("%s requires %s %s, want %s", path, r.Mod.Path, r.Mod.Version, Version)
			}
			if r.Mod.Path == ABIModule || r.Mod.Path == SDKModule {
				checked++
			}
		}
		if len(f.Replace) > 0 {
			t.Errorf("%s has replace directives: the workspace (go.work) ties the modules together", path)
		}
	}
	if checked < 5 {
		t.Errorf("only %d requirements of abi or sdk/go found: is go.work's use list complete?", checked)
	}
}
