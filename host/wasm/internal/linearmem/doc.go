// Package linearmem backs plugins' linear memories outside the Go heap: each is an anonymous
// mapping reserved at the memory's maximum and made readable and writable as the guest grows
// it. A memory grows in place, without the copy a Go slice makes; its pages are the OS's until
// the guest touches them; and it goes back to the OS when its instance closes, not when the Go
// runtime next collects. Held outside the heap, guests' memories do not raise the Go
// collector's heap goal either, which grows with the heap that survives a collection.
package linearmem
