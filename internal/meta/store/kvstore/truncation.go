package kvstore

import (
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Truncations left to finish: "T" ino → from (u32).

func (x *tx) Truncations(limit int) ([]store.Truncation, error) {
	pairs, err := x.t.Scan([]byte{'T'}, []byte{'T' + 1}, limit)
	if err != nil {
		return nil, fmt.Errorf("scan pending truncations: %w", err)
	}
	out := make([]store.Truncation, len(pairs))
	for i, p := range pairs {
		if len(p.Key) != 9 || len(p.Value) != 4 {
			return nil, fmt.Errorf("corrupt pending-truncation record %q", p.Key)
		}
		out[i] = store.Truncation{Ino: store.Ino(be.Uint64(p.Key[1:])), From: be.Uint32(p.Value)}
	}
	return out, nil
}

func (x *tx) SetTruncation(t store.Truncation, on bool) {
	k := be.AppendUint64([]byte{'T'}, uint64(t.Ino))
	if on {
		x.t.Set(k, be.AppendUint32(nil, t.From))
	} else {
		x.t.Delete(k)
	}
}
