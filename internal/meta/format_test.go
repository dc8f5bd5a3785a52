package meta

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// TestMetaVersion checks that a client refuses, at open and at format, a
// volume whose metadata layout is newer than the one it understands, and
// opens older and current ones.
func TestMetaVersion(t *testing.T) {
	cases := []struct {
		name    string
		version int
		ok      bool
	}{
		{"before versioning", 0, true},
		{"current", MetaVersion, true},
		{"newer", MetaVersion + 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := kvstore.New(mem.New(t.Name()))
			f := &Format{Name: "vol", UUID: "u", BlockSize: 4096, MetaVersion: tc.version}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Update(ctx, func(tx store.Tx) error { tx.SetSetting(b); return nil }); err != nil {
				t.Fatal(err)
			}
			got, err := Load(ctx, st)
			if tc.ok {
				if err != nil || got.MetaVersion != tc.version {
					t.Fatalf("Load: %+v, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "newer than this client supports") {
				t.Fatalf("Load of a newer volume: %v", err)
			}
			if _, err := FormatVolume(ctx, st, &Format{Name: "vol", BlockSize: 4096}); err == nil ||
				!strings.Contains(err.Error(), "newer than this client supports") {
				t.Fatalf("FormatVolume over a newer volume: %v", err)
			}
		})
	}
}
