package wasm

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm/internal/binary"
)

// snapshotBlock is the unit a snapshot compares and keeps memory in.
const snapshotBlock = 4 << 10

// snapshot is an instance's state right after _initialize, from which later instances of the
// same Module start instead of running _initialize again: a copy, where a Go guest's runtime
// takes tens of milliseconds to start. All of a module's state is in its linear memory and
// mutable globals when its tables do not change and it has no passive data (binary.Plan); the
// host's side of an instance (its WASI context) holds nothing from _initialize, since the ABI
// gives it no file, no environment and no host call then.
//
// Its memory is kept as the blocks that differ from a new instance's (data segments applied),
// so what a Module holds is what its initialisation wrote: about 1 MiB for a Go guest. Blocks
// the same as another snapshot's of the same code (the code's first) are that one's bytes, not
// a copy: a host of many plugins of one module holds one copy, and for each plugin the few
// blocks its own name and random seeds made different.
type snapshot struct {
	pages   uint32 // the memory's size, in pages
	runs    []memoryRun
	globals []uint64        // the values of the plan's globals, in its order
	clock   int64           // the instance's monotonic clock when it was taken
	init    *recording.Step // the recorded _initialize it comes from, when the module records
	size    int             // bytes held in runs of its own
}

// memoryRun is a run of consecutive changed blocks.
type memoryRun struct {
	off    uint32
	data   []byte
	shared bool // data is part of another snapshot's run
}

// find returns s's bytes at [off, off+n) if one of its runs holds them all.
func (s *snapshot) find(off uint32, n int) []byte {
	i := sort.Search(len(s.runs), func(i int) bool { return uint64(s.runs[i].off)+uint64(len(s.runs[i].data)) > uint64(off) })
	if i == len(s.runs) || s.runs[i].off > off {
		return nil
	}
	r := s.runs[i]
	lo := int(off - r.off)
	if lo+n > len(r.data) {
		return nil
	}
	return r.data[lo : lo+n]
}

// takeSnapshot reads inst, which has just run _initialize and nothing else, and base, the
// memory of an instance of the same code that ran nothing. like, if not nil, is a snapshot of
// the same code whose equal blocks it shares.
func takeSnapshot(inst *instance, plan binary.Plan, base []byte, clock int64, like *snapshot) (*snapshot, error) {
	size := inst.mem.Size()
	mem, ok := inst.mem.Read(0, size)
	if !ok {
		return nil, fmt.Errorf("reading the instance's memory")
	}
	s := &snapshot{pages: size / pageSize, clock: clock}
	if len(inst.lineage) > 0 {
		s.init = inst.lineage[0]
	}
	var zero [snapshotBlock]byte
	var run *memoryRun
	for off := uint32(0); off < size; off += snapshotBlock {
		block := mem[off:min(off+snapshotBlock, size)]
		was := zero[:len(block)]
		if int(off) < len(base) {
			was = base[off:min(int(off)+len(block), len(base))]
			if len(was) < len(block) {
				was = append(append([]byte(nil), was...), zero[:len(block)-len(was)]...)
			}
		}
		if bytes.Equal(block, was) {
			run = nil
			continue
		}
		var same []byte
		if like != nil {
			if b := like.find(off, len(block)); b != nil && bytes.Equal(b, block) {
				same = b
			}
		}
		switch {
		case same != nil && run != nil && run.shared && cap(run.data) >= len(run.data)+len(same) && &run.data[:len(run.data)+1][len(run.data)] == &same[0]:
			run.data = run.data[:len(run.data)+len(same)] // the next bytes of the same run of like
			continue
		case run == nil || run.shared != (same != nil):
			s.runs = append(s.runs, memoryRun{off: off, shared: same != nil})
			run = &s.runs[len(s.runs)-1]
		}
		if same != nil {
			if len(run.data) > 0 { // shared, but not what follows in like: a run of its own
				s.runs = append(s.runs, memoryRun{off: off, shared: true})
				run = &s.runs[len(s.runs)-1]
			}
			run.data = same
			continue
		}
		run.data = append(run.data, block...)
		s.size += len(block)
	}
	for i := range s.runs { // as long as they are: append left room to grow
		if !s.runs[i].shared {
			s.runs[i].data = bytes.Clone(s.runs[i].data)
		}
	}
	for _, name := range plan.Globals {
		g := inst.mod.ExportedGlobal(name)
		if g == nil {
			return nil, fmt.Errorf("the instrumented module lacks its %s global", name)
		}
		s.globals = append(s.globals, g.Get())
	}
	return s, nil
}

// restore makes mod, an instance that ran nothing, what the snapshot's instance was.
func (s *snapshot) restore(mod api.Module, plan binary.Plan) error {
	mem := mod.Memory()
	if pages := mem.Size() / pageSize; pages < s.pages {
		if _, ok := mem.Grow(s.pages - pages); !ok {
			return fmt.Errorf("growing memory to the snapshot's %d pages", s.pages)
		}
	}
	for _, r := range s.runs {
		if !mem.Write(r.off, r.data) {
			return fmt.Errorf("writing the snapshot's memory at %d", r.off)
		}
	}
	for i, name := range plan.Globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("the instrumented module lacks its %s global", name)
		}
		g.Set(s.globals[i])
	}
	return nil
}

// withBaseMemory instantiates code without running anything and calls f with its memory: what
// every instance starts with, its data segments applied. The memory is unmapped once f
// returns, so f keeps none of it.
func (m *Module) withBaseMemory(ctx context.Context, c *code, f func(base []byte) error) error {
	mod, err := m.engine.instantiate(ctx, c.runtime, c.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return err
	}
	mem := mod.Memory()
	base, ok := mem.Read(0, mem.Size())
	if !ok {
		err = fmt.Errorf("reading a new instance's memory")
	} else {
		err = f(base)
	}
	_ = mod.Close(ctx)
	return err
}

// snapshotToStart returns the snapshot a new instance of c starts from, if there is one. If
// there is none yet and the Module takes one, the first caller is the taker (it runs
// _initialize, takes the snapshot from its instance, and calls tookSnapshot), and the others
// wait for it rather than each running _initialize: a plugin's initialisation runs once each
// time its code is loaded. It also stops the let-go of the code armed when the pool emptied:
// its idle time starts again when the pool next empties.
func (m *Module) snapshotToStart(c *code) (snap *snapshot, taker bool) {
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	if m.unloadCode != nil {
		m.unloadCode.Stop()
		m.unloadCode = nil
	}
	snapshots := *m.opts.Snapshots && c.snapshots.Why == ""
	for snapshots && m.snap == nil && m.taking {
		m.snapTaken.Wait()
	}
	if m.snap != nil || !snapshots || m.noSnapshot {
		return m.snap, false
	}
	m.taking = true
	return nil, true
}

// tookSnapshot ends a taker's turn, whether it took the snapshot or not (its instance failed
// to start, or taking failed): the waiters start from it, or the next becomes the taker.
func (m *Module) tookSnapshot() {
	m.codeMu.Lock()
	m.taking = false
	m.codeMu.Unlock()
	m.snapTaken.Broadcast()
}

// takeSnapshot makes the Module's snapshot from inst, which has just run _initialize. If it
// fails, the Module says why and its instances go on starting plainly.
func (m *Module) takeSnapshot(ctx context.Context, c *code, inst *instance, clock int64) {
	began := time.Now()
	var s *snapshot
	err := m.withBaseMemory(ctx, c, func(base []byte) (err error) {
		if s, err = takeSnapshot(inst, c.snapshots, base, clock, c.firstSnap.Load()); err == nil {
			c.firstSnap.CompareAndSwap(nil, s)
		}
		return err
	})
	m.codeMu.Lock()
	if err != nil {
		m.noSnapshot = true
	} else if m.code == c {
		m.snap = s
		m.stats.snapshotBytes.Store(int64(s.size))
	}
	m.codeMu.Unlock()
	if err != nil {
		m.opts.Logger.Error(err, "taking a snapshot of a new instance; instances of this plugin start by running its initialisation")
		return
	}
	m.opts.Logger.V(1).Info("took a snapshot of a new instance: the next ones start from it", "bytes", s.size, "took", time.Since(began).Round(time.Microsecond).String())
}
