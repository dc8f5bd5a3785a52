package sluice_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/metaserver"
)

// startGroup runs a replicated group of n metadata servers on loopback,
// each over a fresh directory, waits until one leads, and returns the
// URL that lists them all. The benchmarks' meter sees the leader.
func startGroup(t testing.TB, n int) string {
	t.Helper()
	rls := make([]net.Listener, n)
	var peers []metaserver.Peer
	for i := range rls {
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rls[i] = rl
		peers = append(peers, metaserver.Peer{ID: fmt.Sprint("m", i), Addr: rl.Addr().String()})
	}
	var addrs []string
	srvs := make([]*metaserver.Server, n)
	for i := range srvs {
		srv, err := metaserver.Open(metaserver.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Raft: &metaserver.RaftOptions{ID: peers[i].ID, Listener: rls[i], Peers: peers,
				HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = srv
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		addrs = append(addrs, l.Addr().String())
	}
	t.Cleanup(func() {
		for _, s := range srvs {
			if err := s.Close(); err != nil {
				t.Errorf("close member: %v", err)
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range srvs {
			if st := s.Stats().Raft; st != nil && st.State == "Leader" {
				current = benchServer{srv: s}
				return "sluice://" + strings.Join(addrs, ",") + "/test"
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no member of the group leads after 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newGroupStore(t testing.TB) store.Store { return kvstore.New(openDB(t, startGroup(t, 3))) }

// TestGroupSuite runs the engines' conformance suites on a group of
// three members.
func TestGroupSuite(t *testing.T) {
	t.Run("meta", func(t *testing.T) {
		metatest.Run(t, func(t *testing.T) store.Store { return newGroupStore(t) })
	})
	t.Run("store", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return newGroupStore(t) }, storetest.Options{})
	})
}

// BenchmarkMetaGroup runs the metadata benchmarks on a group of three
// members on this host (each change durable on two of them before it is
// acknowledged; reads confirmed by a heartbeat round), to compare with
// BenchmarkMeta's single server.
func BenchmarkMetaGroup(b *testing.B) {
	metatest.BenchWith(b, func(tb testing.TB) store.Store { return newGroupStore(tb) }, meter)
}
