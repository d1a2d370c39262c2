package plugin

import (
	"context"
	"fmt"

	"github.com/wasmrec/wasmrec/host/recording"
)

// replayStep runs ro's candidate on the live version's latest recordings (Rollout.Replay), and
// says how many of them it ran differently, and whether that is within the rollout's tolerance
// of differing writes (none set: always).
func (p *Plugin) replayStep(ro *rollingOut) (why string, passed bool) {
	if p.rec == nil {
		return "the plugin records nothing to run the new version on", true // Validate refuses it
	}
	p.rec.store.Flush()
	var mine []recording.Listed
	for _, l := range p.rec.store.List() {
		if l.Module == ro.live {
			mine = append(mine, l)
		}
	}
	mine = mine[max(0, len(mine)-p.cfg.Rollout.Replay.Count()):]
	if len(mine) == 0 {
		return "the live version has no recordings yet to run the new one on", true
	}
	differ, ran := 0, 0
	var first string
	for _, l := range mine {
		select {
		case <-ro.stop:
			return "the rollout ended", true
		default:
		}
		rec, before, err := recording.Load(p.rec.store.Dir(), l.Digest)
		if err != nil { // dropped past the store's bound since it was listed
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*p.cfg.ReconcileTimeout())
		got, err := ro.cand.mod.Rerun(ctx, before, rec.Step)
		cancel()
		if err != nil {
			p.log.Error(err, "rollout: running the new version on a recording", "recording", recording.ShortDigest(l.Digest))
			continue
		}
		ran++
		if d := recording.Compare(rec.Step, got); len(d) > 0 {
			differ++
			if first == "" {
				first = fmt.Sprintf(" (recording %s: %s)", recording.ShortDigest(l.Digest), d[0])
			}
		}
	}
	why = fmt.Sprintf("%d of %d recordings of the live version ran with other writes, Events or results on the new one%s", differ, ran, first)
	if tol := p.cfg.Rollout.Analysis.Tolerance.DifferingWrites; tol != nil && ran > 0 && float64(differ)/float64(ran) > *tol {
		return fmt.Sprintf("%s, past the tolerance of %v", why, *tol), false
	}
	return why, true
}
