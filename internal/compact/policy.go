package compact

import (
	"cmp"
	"slices"

	"github.com/sluicefs/sluice/internal/meta"
)

// Policy decides when a chunk is compacted and how, from what its slice
// list costs:
//
//   - Space. A slice is stored whole until no entry names it, however
//     little of it still shows: overwriting a file in place makes the
//     bucket hold the overwritten bytes too. The waste of a chunk is the
//     bytes its slices store beyond the bytes its reads return. Entries no
//     read reaches (wholly covered by later slices) are dropped at no
//     cost but a metadata transaction; when the waste left exceeds Waste
//     of the visible bytes (and MinWaste), the slices that show least of
//     what they store are rewritten: their visible bytes are copied into
//     one new slice, so the old ones can go. Like the cleaner of a
//     log-structured file system, this copies a little to free a lot.
//   - Reads. Every read replays the list from its newest slice back, and
//     a list of many small slices also means many small objects: a chunk
//     of MaxSlices slices, or of more than MinSlices of which half are
//     shorter than SmallSlice, is rewritten whole.
//
// Plan is pure, so the policy is tested apart from the IO.
type Policy struct {
	MaxSlices  int     // default 200
	MinSlices  int     // default 50
	SmallSlice uint32  // default 128 KiB
	Waste      float64 // default 1/8: waste allowed, as a share of the visible bytes
	MinWaste   int64   // default 4 MiB: waste always allowed
	// MaxCopy bounds the bytes one partial rewrite copies; default a
	// chunk. The slices that free the most per byte copied come first.
	MaxCopy int64
	// MaxShown is the largest share of its stored bytes a slice may
	// show and still be copied: copying a slice that shows a share u of
	// itself costs u/(1-u) bytes per byte freed, 3 at the default 3/4. A
	// writer still at work will soon cover more of it, making it cheaper.
	MaxShown float64
}

// Defaults fills unset fields.
func (p *Policy) Defaults() {
	if p.MaxSlices <= 0 {
		p.MaxSlices = 200
	}
	if p.MinSlices <= 0 {
		p.MinSlices = 50
	}
	if p.SmallSlice == 0 {
		p.SmallSlice = 128 << 10
	}
	if p.Waste <= 0 {
		p.Waste = 1.0 / 8
	}
	if p.MinWaste <= 0 {
		p.MinWaste = 4 << 20
	}
	if p.MaxCopy <= 0 {
		p.MaxCopy = meta.ChunkSize
	}
	if p.MaxShown <= 0 {
		p.MaxShown = 3.0 / 4
	}
}

// SettlePolicy is the policy for a chunk its writer has left alone for a
// while: rewrite until almost nothing is wasted, since no new overwrite
// will undo the work soon.
func SettlePolicy() Policy {
	return Policy{Waste: 1.0 / 64, MinWaste: 256 << 10, MaxShown: 1}
}

// Plan is what a compaction does to one slice list: keep some entries as
// they are, copy the visible pieces of others into one new slice, and drop
// the rest.
type Plan struct {
	// Keep are the entries kept unchanged, in list order.
	Keep []meta.Slice
	// Shown are the entries something shows (the list without the
	// Dropped ones), in list order.
	Shown []meta.Slice
	// Copy are the visible pieces of the rewritten slices, in chunk
	// order, each naming its source slice in the planned list.
	Copy []meta.Segment
	// Entries is the length of the list planned for; Dropped of its
	// entries go without their bytes being copied (nothing showed them).
	Entries, Dropped int
	// Stored, Visible and Waste describe the list before: the bytes its
	// slices store, the bytes its reads return from them, and the
	// difference. Left is the waste the planned list keeps.
	Stored, Visible, Waste, Left int64
}

// Due reports whether the plan changes the list.
func (p Plan) Due() bool { return len(p.Keep) < p.Entries || len(p.Copy) > 0 }

// CopyBytes returns the bytes the plan copies.
func (p Plan) CopyBytes() int64 {
	var n int64
	for _, g := range p.Copy {
		n += int64(g.End - g.Start)
	}
	return n
}

// usage is what a list shows of one stored slice.
type usage struct {
	id      uint64
	size    int64 // stored bytes
	visible int64 // bytes its entries show
}

// Plan returns what to do with list. Dropping entries nothing shows is
// always planned; copying follows the policy.
func (p Policy) Plan(list []meta.Slice) Plan {
	p.Defaults()
	// Entries of one slice (what a partial rewrite leaves) count once:
	// they are one object, and disjoint.
	ids := map[uint64]bool{}
	n, small := 0, 0
	for _, s := range list {
		if s.Id != 0 && ids[s.Id] {
			continue
		}
		ids[s.Id] = true
		n++
		if s.Len < p.SmallSlice {
			small++
		}
	}
	full := n >= p.MaxSlices || n > p.MinSlices && 2*small >= n
	return p.plan(list, full)
}

// FullPlan returns the plan that rewrites list as few entries of one new
// slice (one per run of visible bytes), for a compaction asked for by
// hand.
func FullPlan(list []meta.Slice) Plan {
	p := Policy{}
	p.Defaults()
	return p.plan(list, true)
}

func (p Policy) plan(list []meta.Slice, full bool) Plan {
	segs := meta.Visible(list, 0, meta.ChunkSize)
	at := make(map[*meta.Slice]int, len(list))
	for i := range list {
		at[&list[i]] = i
	}
	vis := make([]int64, len(list))
	for _, g := range segs {
		if g.Slice != nil {
			vis[at[g.Slice]] += int64(g.End - g.Start)
		}
	}
	plan := Plan{Entries: len(list)}
	uses := map[uint64]*usage{}
	for i, s := range list {
		if s.Id == 0 {
			continue
		}
		u := uses[s.Id]
		if u == nil {
			u = &usage{id: s.Id, size: int64(s.Size)}
			uses[s.Id] = u
			plan.Stored += u.size
		}
		u.visible += vis[i]
		plan.Visible += vis[i]
	}
	plan.Waste = plan.Stored - plan.Visible

	if full && len(uses) <= 1 && plan.Waste == 0 && !slices.ContainsFunc(list, func(s meta.Slice) bool { return s.Id == 0 }) {
		full = false // one slice, all of it shown: nothing to win
	}
	rewrite := map[uint64]bool{}
	if full {
		for id := range uses {
			rewrite[id] = true
		}
	} else {
		// Slices nothing shows go with their entries; what the rest
		// waste is what copying can win back.
		var cands []*usage
		var waste int64
		for _, u := range uses {
			if u.visible > 0 {
				cands = append(cands, u)
				waste += u.size - u.visible
			}
		}
		if waste > p.MinWaste && float64(waste) > p.Waste*float64(plan.Visible) {
			// The slices that show least of what they store first:
			// they free the most per byte copied.
			slices.SortFunc(cands, func(a, b *usage) int {
				if c := cmp.Compare(a.visible*b.size, b.visible*a.size); c != 0 {
					return c
				}
				return cmp.Compare(a.id, b.id)
			})
			target := int64(p.Waste / 2 * float64(plan.Visible))
			var copied int64
			for _, u := range cands {
				if waste <= target {
					break
				}
				if float64(u.visible) > p.MaxShown*float64(u.size) {
					break // the rest show more
				}
				if u.size == u.visible || copied+u.visible > p.MaxCopy {
					continue
				}
				rewrite[u.id] = true
				copied += u.visible
				waste -= u.size - u.visible
			}
		}
	}
	for _, u := range uses {
		if u.visible > 0 && !rewrite[u.id] {
			plan.Left += u.size - u.visible
		}
	}
	for i, s := range list {
		if vis[i] > 0 {
			plan.Shown = append(plan.Shown, s)
		}
		switch {
		case vis[i] > 0 && !rewrite[s.Id] && !(full && s.Id == 0):
			plan.Keep = append(plan.Keep, s)
		case vis[i] == 0:
			plan.Dropped++
		}
	}
	for _, g := range segs {
		if g.Slice != nil && g.Slice.Id != 0 && rewrite[g.Slice.Id] {
			plan.Copy = append(plan.Copy, g)
		}
	}
	return plan
}
