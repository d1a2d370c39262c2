//go:build race

package wasm_test

// raceDetector: the race detector is on, and the memory the process holds says little.
const raceDetector = true
