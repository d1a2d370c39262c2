// Package informers is one plugin's hold on the host's shared informers: its controller's
// sources, its warm standby, its guest's reads and the lists a swap makes each get their
// informers here, so that what the plugin holds, and why, is known in one place and let go of
// in one place.
package informers
