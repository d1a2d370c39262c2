package shard

import (
	"strconv"
	"strings"
)

// Unit names shard index of a plugin as the replicas sharing it call it: "plugin/index". A
// plugin not split is one unit, its name.
func Unit(plugin string, index int) string { return plugin + "/" + strconv.Itoa(index) }

// SplitUnit reads a unit's name as Unit writes it: "plugin/2" is shard 2 of plugin. A name with
// no shard index ("plugin") is the whole plugin: ok is false, index 0.
func SplitUnit(unit string) (plugin string, index int, ok bool) {
	if p, i, found := strings.Cut(unit, "/"); found {
		if n, err := strconv.Atoi(i); err == nil && n >= 0 {
			return p, n, true
		}
	}
	return unit, 0, false
}
