// Package versions keeps the module versions a plugin has left behind: the ones swapped out
// lately, kept compiled so that a swap back is immediate, and the digests refused for what they
// are, so that a module refused once is not compiled again until its source changes. It is the
// bookkeeping half of the swap protocol; package plugin does the rest (checks, watches, publish).
package versions
