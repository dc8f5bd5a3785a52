package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/backup"
	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// newVolume formats a volume compressed with lz4 and encrypted with a
// fresh RSA key, with one file in it.
func newVolume(t *testing.T) *volumetest.Volume {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	tv := volumetest.New(t, func(f *meta.Format) {
		f.Compression, f.EncryptKey, f.EncryptAlgo = "lz4", string(pemKey), encrypt.AES256GCMRSA
	})
	volumetest.WriteFile(t, tv.MetaURL, "hello", []byte("hello, backup\n"))
	return tv
}

// open opens the volume as a mount's client, with the clock now.
func open(t *testing.T, metaURL string, readOnly bool, now func() time.Time) *volume.Volume {
	t.Helper()
	v, err := volume.Open(context.Background(), metaURL, volume.Options{Level: volume.Client,
		Meta: meta.Config{ReadOnly: readOnly, Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(context.Background()) })
	return v
}

func config(v *volume.Volume, interval time.Duration, now func() time.Time) backup.Config {
	return backup.Config{Interval: interval, Client: v.Client(), Store: v.Store(), Objects: v.SealedObjects(),
		TempDir: os.TempDir(), Now: now}
}

// TestOnceLeaseAndLoad backs up with one client, sees a second client
// within the interval and a read-only one back up nothing, checks the
// object is encrypted (and not lz4-compressed) in the bucket, and loads
// it into a fresh engine.
func TestOnceLeaseAndLoad(t *testing.T) {
	ctx := context.Background()
	tv := newVolume(t)
	a := open(t, tv.MetaURL, false, nil)
	b := open(t, tv.MetaURL, false, nil)
	ro := open(t, tv.MetaURL, true, nil)

	// Old backups that the first backup's rotation thins.
	for _, k := range []string{"meta/dump-2020-01-01-000000.json.gz", "meta/dump-2020-01-02-000000.json.gz"} {
		if err := a.SealedObjects().Put(ctx, k, strings.NewReader("old")); err != nil {
			t.Fatal(err)
		}
	}

	key, err := backup.Once(ctx, config(ro, time.Hour, nil))
	if err != nil || key != "" {
		t.Fatalf("read-only client: Once = %q, %v; want no backup", key, err)
	}
	key, err = backup.Once(ctx, config(a, time.Hour, nil))
	if err != nil || !strings.HasPrefix(key, "meta/dump-") {
		t.Fatalf("first client: Once = %q, %v; want a backup", key, err)
	}
	if k, err := backup.Once(ctx, config(b, time.Hour, nil)); err != nil || k != "" {
		t.Fatalf("second client within the interval: Once = %q, %v; want no backup", k, err)
	}
	if k, err := backup.Once(ctx, config(a, time.Hour, nil)); err != nil || k != "" {
		t.Fatalf("first client again within the interval: Once = %q, %v; want no backup", k, err)
	}
	list, err := backup.List(ctx, a.SealedObjects())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list {
		keys = append(keys, o.Key)
	}
	if want := []string{"meta/dump-2020-01-01-000000.json.gz", key}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("backups after the rotation: %v; want %v", keys, want)
	}

	// In the bucket, under the volume's name, sealed: no gzip magic.
	raw, err := os.ReadFile(filepath.Join(tv.Bucket, "vol", key))
	if err != nil {
		t.Fatalf("the backup is not in the bucket: %v", err)
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) || bytes.Contains(raw, []byte("hello")) {
		t.Error("the backup is stored in the clear on an encrypted volume")
	}
	// Through the volume's layer: gzip, so not lz4-compressed again.
	rc, err := a.SealedObjects().Get(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(plain, []byte{0x1f, 0x8b}) {
		t.Fatalf("the decrypted backup starts with % x, not gzip", plain[:min(8, len(plain))])
	}

	// What `sluice load --encrypt-rsa-key` does with a copy of the object.
	if unsealed, err := backup.Unseal(raw, []byte(tv.Format.EncryptKey), "", ""); err != nil || !bytes.Equal(unsealed, plain) {
		t.Errorf("Unseal of the stored object: %d bytes, %v; want the %d of the dump", len(unsealed), err, len(plain))
	}

	zr, err := dump.NewReader(bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := all.Open(ctx, "sqlite3://"+filepath.Join(t.TempDir(), "restored.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	rep, err := dump.Load(ctx, fresh, zr, dump.LoadOptions{})
	if err != nil {
		t.Fatalf("load the backup: %v", err)
	}
	if rep.Name != "vol" || rep.Files != 1 {
		t.Errorf("loaded volume %q with %d files; want vol with 1", rep.Name, rep.Files)
	}
	f, err := meta.Load(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if f.UUID != tv.Format.UUID || f.EncryptKey != tv.Format.EncryptKey || f.Compression != "lz4" {
		t.Errorf("restored settings differ: UUID %s, compression %s, same key %v", f.UUID, f.Compression, f.EncryptKey == tv.Format.EncryptKey)
	}
}

// TestLeaseAfterInterval checks that the lease goes again once the
// interval has passed, to whichever client asks first.
func TestLeaseAfterInterval(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	var offset time.Duration
	clock := func() time.Time { return time.Now().Add(offset) }
	a := open(t, tv.MetaURL, false, clock)
	b := open(t, tv.MetaURL, false, clock)
	first, err := backup.Once(ctx, config(a, time.Hour, clock))
	if err != nil || first == "" {
		t.Fatalf("Once = %q, %v", first, err)
	}
	offset = 59 * time.Minute
	if k, _ := backup.Once(ctx, config(b, time.Hour, clock)); k != "" {
		t.Fatalf("a backup %v after the last one with an interval of 1h: %s", offset, k)
	}
	offset = 61 * time.Minute
	second, err := backup.Once(ctx, config(b, time.Hour, clock))
	if err != nil || second == "" || second == first {
		t.Fatalf("after the interval: Once = %q, %v; want a new backup", second, err)
	}
	// A volume over MaxInodes is skipped at intervals of an hour or less,
	// backed up at longer ones.
	offset = 4 * time.Hour
	c := config(a, time.Hour, clock)
	c.MaxInodes = 1
	for _, name := range []string{"one", "two"} {
		volumetest.WriteFile(t, tv.MetaURL, name, nil) // its client flushes the usage as it closes
	}
	if k, err := backup.Once(ctx, c); err != nil || k != "" {
		t.Fatalf("over MaxInodes: Once = %q, %v; want it skipped", k, err)
	}
	c.Interval = 2 * time.Hour
	if k, err := backup.Once(ctx, c); err != nil || k == "" {
		t.Fatalf("over MaxInodes with a 2h interval: Once = %q, %v; want a backup", k, err)
	}
}

// TestRun checks the loop backs up and stops with its context.
func TestRun(t *testing.T) {
	tv := volumetest.New(t, nil)
	v := open(t, tv.MetaURL, false, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { backup.Run(ctx, config(v, time.Second, nil)); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := backup.List(context.Background(), v.SealedObjects())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no backup within 10s with an interval of 1s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}
