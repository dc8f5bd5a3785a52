package volume_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/testserver"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

func TestOpenLevels(t *testing.T) {
	tv := volumetest.New(t, nil)
	ctx := context.Background()
	for _, level := range []volume.Level{volume.Metadata, volume.Data, volume.Client, volume.FileSystem} {
		t.Run(level.String(), func(t *testing.T) {
			v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: level})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if v.Level() != level || v.Store() == nil || v.Format() == nil || v.Format().UUID != tv.Format.UUID {
				t.Errorf("level %v, store %v, format %+v; want the level, a store and the volume's settings", v.Level(), v.Store(), v.Format())
			}
			has := map[string]bool{
				"objects": v.Objects() != nil, "sealed": v.SealedObjects() != nil, "metrics": v.Metrics() != nil,
				"chunks": v.Chunks() != nil, "client": v.Client() != nil, "vfs": v.VFS() != nil,
			}
			want := map[string]bool{
				"objects": level >= volume.Data, "sealed": level >= volume.Data, "metrics": level >= volume.Data,
				"chunks": level >= volume.Client, "client": level >= volume.Client, "vfs": level >= volume.FileSystem,
			}
			for name := range want {
				if has[name] != want[name] {
					t.Errorf("%s opened: %v, want %v", name, has[name], want[name])
				}
			}
			if level >= volume.Client {
				sessions, err := meta.Sessions(ctx, v.Store())
				if err != nil || len(sessions) != 1 {
					t.Errorf("sessions while open = %d, %v; want the client's", len(sessions), err)
				}
			}
			st := v.Store()
			if err := v.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := v.Close(ctx); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := meta.Sessions(ctx, st); err == nil {
				t.Error("the metadata engine still answers after Close")
			}
		})
	}
	// The client's session ended with Close.
	v, err := volume.Open(ctx, tv.MetaURL, volume.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	if sessions, err := meta.Sessions(ctx, v.Store()); err != nil || len(sessions) != 0 {
		t.Errorf("sessions after Close = %+v, %v; want none", sessions, err)
	}
}

// recorder records the keys put into the raw bucket.
type recorder struct {
	object.Store
	mu   sync.Mutex
	keys []string
}

func (r *recorder) Put(ctx context.Context, key string, data io.Reader) error {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	return r.Store.Put(ctx, key, data)
}

// TestFileSystem writes a file through the VFS of one Open and reads it
// back through another, and checks the blocks went through the WrapBucket
// hook, under the volume's prefix, with their spec keys.
func TestFileSystem(t *testing.T) {
	tv := volumetest.New(t, nil)
	ctx := context.Background()
	var rec *recorder
	opts := volume.Options{Level: volume.FileSystem,
		Chunks: chunk.Config{CacheDirs: []string{filepath.Join(t.TempDir(), "cache")}},
		WrapBucket: func(s object.Store) (object.Store, error) {
			rec = &recorder{Store: s}
			return rec, nil
		}}
	v, err := volume.Open(ctx, tv.MetaURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("sluice volume "), 20000) // 280000 bytes: 5 blocks of 64 KiB
	_, fh, err := v.VFS().Create(ctx, meta.RootIno, []byte("f"), 0o644, 0o022, uint32(os.O_RDWR))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := v.VFS().Write(ctx, fh, 0, data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := v.VFS().Release(ctx, fh, 0); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if rec == nil || len(rec.keys) != 5 {
		t.Fatalf("the bucket hook saw puts %v, want 5 blocks", rec)
	}
	for _, k := range rec.keys {
		rel, ok := strings.CutPrefix(k, "vol/")
		if _, err := chunk.ParseBlockKey(rel); !ok || err != nil {
			t.Errorf("raw key %q is not a block key under vol/: %v", k, err)
		}
	}

	v, err = volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	infos, err := v.Objects().List(ctx, "chunks/", "", 0)
	if err != nil || len(infos) != 5 {
		t.Errorf("Objects lists %d blocks, %v; want 5", len(infos), err)
	}
	a, err := v.VFS().Lookup(ctx, meta.RootIno, []byte("f"))
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	_, fh, err = v.VFS().Open(ctx, a.Ino, uint32(os.O_RDONLY))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got := make([]byte, len(data)+10)
	n, err := v.VFS().Read(ctx, fh, 0, got)
	if err != nil || !bytes.Equal(got[:n], data) {
		t.Errorf("Read = %d bytes, %v; want the %d bytes written", n, err, len(data))
	}
	v.VFS().Release(ctx, fh, 0)
}

// TestReadOnly checks that a read-only file system refuses changes.
func TestReadOnly(t *testing.T) {
	tv := volumetest.New(t, nil)
	ctx := context.Background()
	v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem, Meta: meta.Config{ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	if _, _, err := v.VFS().Create(ctx, meta.RootIno, []byte("f"), 0o644, 0, uint32(os.O_RDWR)); !errors.Is(err, syscall.EROFS) {
		t.Errorf("Create on a read-only volume: %v, want EROFS", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	pem, err := os.ReadFile(filepath.Join("..", "object", "encrypt", "testdata", "pkcs1-aes256.pem"))
	if err != nil {
		t.Fatal(err)
	}
	locked := volumetest.New(t, func(f *meta.Format) {
		f.EncryptKey, f.EncryptAlgo, f.KeyEncrypted = string(pem), encrypt.AES256GCMRSA, true
	})
	hookErr := errors.New("hook failed")
	tests := []struct {
		name    string
		metaURL string
		opts    volume.Options
		want    string
	}{
		{"no volume", "sqlite3://" + filepath.Join(t.TempDir(), "empty.db"), volume.Options{}, "does not exist"},
		{"unknown level", tv.MetaURL, volume.Options{Level: 7}, "unknown level"},
		{"negative limit", tv.MetaURL, volume.Options{Level: volume.Data, Objects: volume.ObjectOptions{UploadLimit: -1}}, "negative"},
		{"failing hook", tv.MetaURL, volume.Options{Level: volume.Data,
			WrapBucket: func(object.Store) (object.Store, error) { return nil, hookErr }}, hookErr.Error()},
		{"no passphrase", locked.MetaURL, volume.Options{Level: volume.Data}, encrypt.PassphraseEnv},
		{"wrong passphrase", locked.MetaURL, volume.Options{Level: volume.Data, Passphrase: "wrong"}, "encryption key"},
		{"writeback without disk", tv.MetaURL, volume.Options{Level: volume.Client, Chunks: chunk.Config{Writeback: true}}, "writeback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := volume.Open(ctx, tt.metaURL, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, %v; want an error containing %q", v, err, tt.want)
			}
		})
	}
	// The metadata alone opens without the passphrase; the data with it.
	for _, opts := range []volume.Options{{}, {Level: volume.Data, Passphrase: "sluice-test"}} {
		v, err := volume.Open(ctx, locked.MetaURL, opts)
		if err != nil {
			t.Fatalf("Open(%v): %v", opts.Level, err)
		}
		if v.PlainBlocks() {
			t.Error("PlainBlocks of an encrypted volume")
		}
		v.Close(ctx)
	}
}

// TestOpenTimeout opens a metadata engine that accepts connections and
// never answers: OpenTimeout makes Open fail and say why.
func TestOpenTimeout(t *testing.T) {
	addr := testserver.Silent(t)
	v, err := volume.Open(context.Background(), "redis://"+addr+"/0",
		volume.Options{OpenTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Errorf("Open on a silent engine = %v, %v; want an error naming the timeout", v, err)
	}
}
