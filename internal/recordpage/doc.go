// Package recordpage shows recordings as one HTML page, to read in a browser: each reconcile's
// request and outcome, the timeline of what the guest met (host calls with their requests and
// answers, clocks, random bytes, output), its writes as field diffs against the objects as it
// read them, and, for a rerun on another build, the two builds' writes side by side. The page
// is static: no script, no request of its own; everything recorded is escaped.
package recordpage
