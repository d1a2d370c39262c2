// Package backoff holds every retry schedule of wasmrec, in one place: each loop that tries
// again after a failure waits as one of the schedules here says, so that how often the host
// knocks on a registry, a module file or the API server is decided here and nowhere else.
//
// A schedule is client-go's wait.Backoff (exponential, with jitter, capped); this package
// names the schedules and adds what every loop needed around it: a reset after a success and
// a wait that ends with its context.
package backoff
