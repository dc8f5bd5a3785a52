package etcd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/etcd"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvtest"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/testserver"
)

// volumeURL returns base with a fresh random prefix appended; the prefix's
// keys are deleted when t ends.
func volumeURL(t *testing.T, base string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	base, query, _ := strings.Cut(strings.TrimRight(base, "/"), "?")
	u := base + "/sluice-test-" + hex.EncodeToString(b)
	if query != "" {
		u += "?" + query
	}
	t.Cleanup(func() { wipe(t, u) })
	return u
}

// wipe deletes every key of the volume at u through a handle of its own
// (the test's handles are closed by then), in transactions that fit etcd's
// default --max-txn-ops.
func wipe(t *testing.T, u string) {
	ctx := context.Background()
	db, err := etcd.Open(ctx, u, true)
	if err != nil {
		t.Errorf("wipe %s: %v", u, err)
		return
	}
	defer db.Close()
	for more := true; more; {
		err := db.Update(ctx, func(tx kvstore.Txn) error {
			pairs, err := tx.Scan(nil, nil, 100)
			for _, p := range pairs {
				tx.Delete(p.Key)
			}
			more = len(pairs) > 0
			return err
		})
		if err != nil {
			t.Errorf("wipe %s: %v", u, err)
			return
		}
	}
}

func open(t *testing.T, u string, create bool) *etcd.DB {
	t.Helper()
	db, err := etcd.Open(context.Background(), u, create)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	return db
}

func suite(t *testing.T, base string) {
	metatest.RunOptions(t, func(t *testing.T) store.Store {
		return kvstore.New(open(t, volumeURL(t, base), true))
	}, metatest.Options{ModelOps: 500})
}

func TestSuite(t *testing.T) { suite(t, testserver.URL(t, testserver.Etcd)) }

func TestSuiteCluster(t *testing.T) { suite(t, testserver.URL(t, testserver.EtcdCluster)) }

func TestStore(t *testing.T) {
	base := testserver.URL(t, testserver.Etcd)
	storetest.Run(t, func(t *testing.T) store.Store {
		return kvstore.New(open(t, volumeURL(t, base), true))
	}, storetest.Options{})
}

// TestRaces runs two handles of one volume, each through another member.
func TestRaces(t *testing.T) {
	u := volumeURL(t, testserver.URL(t, testserver.EtcdCluster))
	st1 := kvstore.New(open(t, u, true))
	defer st1.Close()
	st2 := kvstore.New(open(t, u, true)) // nothing is formatted
	defer st2.Close()
	storetest.Races(t, st1, st2)
}

func kvTests(t *testing.T, base string) {
	kvtest.Run(t, func(t *testing.T) kvstore.DB {
		db := open(t, volumeURL(t, base), true)
		t.Cleanup(func() { db.Close() })
		return db
	}, kvtest.Options{Snapshot: true})
}

func TestKV(t *testing.T) { kvTests(t, testserver.URL(t, testserver.Etcd)) }

func TestKVCluster(t *testing.T) { kvTests(t, testserver.URL(t, testserver.EtcdCluster)) }

// TestKVSerializable lets View read from a member's local state. On a
// single member that state is current, so the contract still holds (on a
// cluster a View could miss a commit made through another member).
func TestKVSerializable(t *testing.T) {
	kvTests(t, testserver.URL(t, testserver.Etcd)+"?serializable=true")
}

// TestTwoHandles runs two clients, each on its own handle of one volume,
// creating files in one directory at the same time.
func TestTwoHandles(t *testing.T) {
	u := volumeURL(t, testserver.URL(t, testserver.EtcdCluster))
	st1 := kvstore.New(open(t, u, true))
	defer st1.Close()
	metatest.TwoClients(t, st1, func() store.Store {
		st2 := kvstore.New(open(t, u, false))
		t.Cleanup(func() { st2.Close() })
		return st2
	})
}

// TestMalformedURL needs no server.
func TestMalformedURL(t *testing.T) {
	for _, u := range []string{
		"",
		"etcd://",
		"etcd:///vol",
		"etcd://127.0.0.1/vol",
		"etcd://127.0.0.1:99999/vol",
		"etcd://127.0.0.1:2379,/vol",
		"etcd://127.0.0.1:2379",
		"etcd://127.0.0.1:2379/",
		"etcd://127.0.0.1:2379/%ff",
		"etcd://127.0.0.1:2379/%zz",
		"etcd://127.0.0.1:2379/vol?consistency=weak",
		"etcd://127.0.0.1:2379/vol?serializable=maybe",
		"etcd://:secret@127.0.0.1:2379/vol",
		"redis://127.0.0.1:2379/vol",
	} {
		db, err := etcd.Open(context.Background(), u, true)
		if err == nil {
			db.Close()
			t.Fatalf("open %q succeeded", u)
		}
		t.Logf("open %q: %v", u, err)
		msg := err.Error()
		if !strings.HasPrefix(msg, "malformed etcd URL") || strings.Contains(msg, "secret") || strings.Contains(msg, "\n") {
			t.Errorf("open %q: %v", u, err)
		}
	}
}

// TestUnreachable needs no server: nothing listens on port 1.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	db, err := etcd.Open(ctx, "etcd://user:secret@127.0.0.1:1/vol", true)
	if err == nil {
		db.Close()
		t.Fatal("open of a closed port succeeded")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("open took %v", took)
	}
	t.Logf("open of a closed port: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, "etcd at 127.0.0.1:1 is unreachable") || strings.Contains(msg, "secret") ||
		strings.Contains(msg, "\n") {
		t.Fatalf("open of a closed port: %v", err)
	}
}

func TestNoVolume(t *testing.T) {
	u := volumeURL(t, testserver.URL(t, testserver.Etcd))
	db, err := etcd.Open(context.Background(), u, false)
	if err == nil {
		db.Close()
		t.Fatal("open of an empty prefix without create succeeded")
	}
	if !strings.Contains(err.Error(), "holds no volume") {
		t.Fatalf("open of an empty prefix: %v", err)
	}
}
