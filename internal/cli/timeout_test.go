package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/testserver"
	"github.com/sluicefs/sluice/internal/volume"
)

// TestCommandsMetaTimeout: status, fsck and gc on a metadata engine that
// accepts connections and never answers fail within --meta-timeout
// instead of hanging. The engines' own open timeouts are 5 s and more, so
// failing well before that shows the flag at work.
func TestCommandsMetaTimeout(t *testing.T) {
	addr := testserver.Silent(t)
	urls := map[string]string{
		"redis":    "redis://" + addr + "/0",
		"postgres": "postgres://u:p@" + addr + "/db?sslmode=disable",
		"mysql":    "mysql://u:p@(" + addr + ")/db",
		"etcd":     "etcd://" + addr + "/vol",
	}
	const bound = 500 * time.Millisecond
	const margin = 4 * time.Second // generous, and still below the engines' own open timeouts
	for engine, url := range urls {
		for _, command := range []string{"status", "fsck", "gc"} {
			t.Run(engine+"/"+command, func(t *testing.T) {
				root := NewRoot()
				var out bytes.Buffer
				root.SetOut(&out)
				root.SetErr(&out)
				root.SetArgs([]string{command, url, "--meta-timeout", bound.String()})
				start := time.Now()
				err := root.Execute()
				took := time.Since(start)
				if err == nil {
					t.Fatalf("%s on a silent engine succeeded:\n%s", command, out.String())
				}
				if took > bound+margin {
					t.Errorf("%s on a silent engine failed after %v, want about --meta-timeout %v: %v", command, took, bound, err)
				}
				t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
			})
		}
	}
}

// TestStoreMetaTimeout: a volume opened as status, fsck and gc open it
// (openVolume with --meta-timeout) whose engine stops answering after the
// opening fails their reads within the bound, and works again once the
// engine answers.
func TestStoreMetaTimeout(t *testing.T) {
	for _, engine := range []string{"redis", "postgres", "mysql", "etcd"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			url, proxy := testserver.Proxied(t, testserver.MetaURL(t, engine, fmt.Sprintf("cli%d", time.Now().UnixNano())))
			root := NewRoot()
			root.SetOut(io.Discard)
			root.SetArgs([]string{"format", url, "vol", "--bucket", t.TempDir()})
			if err := root.Execute(); err != nil {
				t.Fatalf("format: %v", err)
			}
			const bound = 500 * time.Millisecond
			v, err := openVolume(ctx, url, volume.Metadata, bound)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close(context.WithoutCancel(ctx))
			st := v.Store()
			reads := []struct {
				name string
				fn   func() error
			}{
				{"sessions (status)", func() error { _, err := meta.Sessions(ctx, st); return err }},
				{"check (fsck)", func() error {
					_, err := meta.Check(ctx, st, meta.CheckOptions{OnDamage: func(meta.Damage) {}})
					return err
				}},
				{"referenced slices (gc)", func() error { _, err := meta.ReferencedSlices(ctx, st, nil); return err }},
				{"deletion queue (gc)", func() error { _, err := meta.PendingSlices(ctx, st); return err }},
			}
			proxy.Stall(true)
			for _, r := range reads {
				start := time.Now()
				err := r.fn()
				took := time.Since(start)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s while the engine does not answer: %v, want a deadline error", r.name, err)
				}
				if took > bound+10*time.Second {
					t.Errorf("%s while the engine does not answer failed after %v, want about %v", r.name, took, bound)
				}
			}
			proxy.Stall(false)
			for _, r := range reads {
				if err := r.fn(); err != nil {
					t.Errorf("%s once the engine answers again: %v", r.name, err)
				}
			}
		})
	}
}
