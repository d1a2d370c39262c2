package testenv

import (
	"fmt"
	"os"
	"testing"
)

// All is the variable `make test` sets: every test runs, and one missing what it needs fails.
const All = "WASMREC_TEST_ALL"

// Required reports whether a test missing what it needs must fail (under `make test`) rather
// than skip.
func Required() bool { return os.Getenv(All) != "" }

// Missing stops t for lack of what (an error saying what is missing), with the make target that
// provides it: a skip, or under `make test` a failure.
func Missing(t testing.TB, what error, target string) {
	t.Helper()
	msg := fmt.Sprintf("%v: run `make %s` (make test does)", what, target)
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
