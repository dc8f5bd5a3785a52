package volume_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/limit"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// limitOf finds the bandwidth limit decorator in a volume's object stack.
func limitOf(t *testing.T, s object.Store) *limit.Store {
	t.Helper()
	for s != nil {
		if l, ok := s.(*limit.Store); ok {
			return l
		}
		u, ok := s.(object.Unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	t.Fatal("no limit decorator in the object stack")
	return nil
}

// TestBandwidthFollowsSettings checks that an open volume's bandwidth
// limits follow a change of the volume's settings at the client's next
// heartbeat, except a limit the options set, and that the caller's
// OnFormatChange still hears of the change.
func TestBandwidthFollowsSettings(t *testing.T) {
	tests := []struct {
		name             string
		opts             volume.ObjectOptions
		openUp           int64 // bytes per second at open
		wantUp, wantDown int64 // bytes per second after the change
	}{
		{"volume's limits", volume.ObjectOptions{}, 10_000_000, 1_000_000, 2_000_000},
		{"mount's upload limit wins", volume.ObjectOptions{UploadLimit: 5000}, 5000, 5000, 2_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tv := volumetest.New(t, func(f *meta.Format) { f.UploadLimit = 80 }) // 10 MB/s
			ctx := context.Background()
			changed := make(chan *meta.Format, 1)
			v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.Client, Objects: tt.opts,
				Meta: meta.Config{Heartbeat: time.Millisecond, OnFormatChange: func(f *meta.Format) { changed <- f }}})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close(ctx)
			l := limitOf(t, v.Objects())
			if up, down := l.Rate(); up != tt.openUp || down != 0 {
				t.Fatalf("limits at open: %d, %d; want %d, 0", up, down, tt.openUp)
			}
			old, err := meta.Load(ctx, v.Store())
			if err != nil {
				t.Fatal(err)
			}
			f := *old
			f.UploadLimit, f.DownloadLimit = 8, 16 // Mbps
			if err := meta.UpdateFormat(ctx, v.Store(), old, &f); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-changed:
				if got.UploadLimit != 8 || got.DownloadLimit != 16 {
					t.Fatalf("OnFormatChange got %+v", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no heartbeat applied the change within 10s")
			}
			if up, down := l.Rate(); up != tt.wantUp || down != tt.wantDown {
				t.Errorf("limits after the change: %d, %d; want %d, %d", up, down, tt.wantUp, tt.wantDown)
			}
		})
	}
}
