// Package release holds the version of the modules plugin authors require: abi and sdk/go are
// released together, tagged abi/<Version> and sdk/go/<Version>, and every go.mod in this
// repository that requires them names this version (a test checks it).
package release
