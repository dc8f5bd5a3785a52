package metaserver

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// member is one server of a group made by a test.
type member struct {
	tweak    func(*RaftOptions) // faults to inject
	id, dir  string
	secret   []byte // of the members' port
	client   string // the client address
	raftAddr string
	s        *Server
}

// startGroup starts n members of a new group on loopback; tweak, when
// given, injects faults in each.
func startGroup(t testing.TB, n int, tweak ...func(*RaftOptions)) []*member {
	t.Helper()
	ms := make([]*member, n)
	var peers []Peer
	rls := make([]net.Listener, n)
	for i := range ms {
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rls[i] = rl
		ms[i] = &member{id: fmt.Sprintf("m%d", i), dir: t.TempDir(), raftAddr: rl.Addr().String()}
		if len(tweak) > 0 {
			ms[i].tweak = tweak[0]
		}
		peers = append(peers, Peer{ID: ms[i].id, Addr: ms[i].raftAddr})
	}
	for i, m := range ms {
		m.start(t, rls[i], peers)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			if m.s != nil {
				m.s.Close()
			}
		}
	})
	return ms
}

// start opens m's server on rl (its Raft port; nil: listen again on
// m.raftAddr) and serves clients on m.client (or a new port).
func (m *member) start(t testing.TB, rl net.Listener, peers []Peer) {
	t.Helper()
	var err error
	if rl == nil {
		if rl, err = net.Listen("tcp", m.raftAddr); err != nil {
			t.Fatal(err)
		}
	}
	addr := m.client
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m.client = ln.Addr().String()
	ro := &RaftOptions{
		ID: m.id, Listener: rl, Peers: peers, Secret: m.secret,
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
	}
	if m.tweak != nil {
		m.tweak(ro)
	}
	m.s, err = Open(Options{Dir: m.dir, Logger: quiet(), Raft: ro})
	if err != nil {
		t.Fatal(err)
	}
	go m.s.Serve(ln)
}

// leader waits for a member of ms to lead and returns it.
func leader(t testing.TB, ms []*member) *member {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if m.s != nil && m.s.leading.Load() {
				return m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no member leads after 10s")
	return nil
}

func groupURL(ms []*member) string {
	var as []string
	for _, m := range ms {
		as = append(as, m.client)
	}
	return "sluice://" + strings.Join(as, ",") + "/vol?timeout=20s&ops=client"
}

// waitConverged waits until every running member publishes the same
// state as the leader, and returns it.
func waitConverged(t *testing.T, ms []*member) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var states []string
		for _, m := range ms {
			if m.s != nil {
				states = append(states, dump(m.s))
			}
		}
		same := true
		for _, s := range states[1:] {
			same = same && s == states[0]
		}
		if same {
			return states[0]
		}
		if time.Now().After(deadline) {
			for i, s := range states {
				t.Logf("member %d: %d bytes of state", i, len(s))
			}
			t.Fatal("members did not converge in 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupFailover writes through a client while the leader of a
// three-member group stops: every write acknowledged is on the members
// left, no write fails, and they hold the same state.
func TestGroupFailover(t *testing.T) {
	ms := startGroup(t, 3)
	leader(t, ms)
	ctx := context.Background()
	db, err := sluice.Open(ctx, groupURL(ms), true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writers, each = 4, 150
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	var acked sync.Map
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := fmt.Sprintf("k%d-%04d", w, i)
				// A snapshot on a member that stopped leading is gone:
				// a conflict, which the metadata layer runs again.
				err := store.Retry(ctx, func() error {
					return db.Update(ctx, func(tx kvstore.Txn) error {
						if _, err := tx.Get([]byte(k)); err != nil {
							return err
						}
						tx.Set([]byte(k), []byte(k))
						return nil
					})
				})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
					continue
				}
				acked.Store(k, true)
			}
		}()
	}
	// Stop the leader twice while the writers run.
	for range 2 {
		time.Sleep(150 * time.Millisecond)
		l := leader(t, ms)
		l.s.Close()
		l.s = nil
		time.Sleep(100 * time.Millisecond)
		l.start(t, nil, nil)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	state := waitConverged(t, ms)
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !strings.Contains(state, k.(string)+"="+k.(string)+" ") {
			t.Errorf("acknowledged write %s is missing", k)
		}
		return true
	})
	if n != writers*each {
		t.Errorf("%d writes acknowledged, want %d", n, writers*each)
	}
}

// TestGroupFromSingleServer starts a member on a single server's data
// directory: the state is kept, and a member added later receives it.
func TestGroupFromSingleServer(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	for i := range 50 {
		commit(t, s, set(fmt.Sprintf("key%02d", i), "v"))
	}
	want := dump(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &member{id: "a", dir: dir, raftAddr: rl.Addr().String()}
	a.start(t, rl, []Peer{{ID: "a", Addr: rl.Addr().String()}})
	defer func() { a.s.Close() }()
	leader(t, []*member{a})
	if got := dump(a.s); got != want {
		t.Fatalf("state after becoming a member:\n%s\nwant\n%s", got, want)
	}
	commit(t, a.s, set("after", "v"))

	rb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &member{id: "b", dir: t.TempDir(), raftAddr: rb.Addr().String()}
	b.start(t, rb, nil)
	defer func() { b.s.Close() }()
	// The legacy snapshot is taken once a leads; wait for it to be
	// durable before adding b, which then must receive it.
	time.Sleep(500 * time.Millisecond)
	if err := a.s.AddMember(context.Background(), "b", b.raftAddr); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, []*member{a, b})
	if !strings.Contains(dump(b.s), "key00=v ") || !strings.Contains(dump(b.s), "after=v ") {
		t.Fatalf("the new member misses the state: %s", dump(b.s))
	}
	// The single server's files are kept aside, and not loaded again.
	if cps, _ := listFiles(dir, "checkpoint-", ".ckpt"); len(cps) > 0 {
		t.Errorf("the single server's checkpoints are still in %s: %v", dir, cps)
	}
	if cps, _ := listFiles(filepath.Join(dir, "single-server"), "checkpoint-", ".ckpt"); len(cps) == 0 {
		t.Errorf("the single server's checkpoint is not kept in %s/single-server", dir)
	}
}

// TestGroupFromSingleServerAlone: a single server's data directory is
// refused as one of several first members (the others would not have its
// state), and a first start as a member that fails half-way leaves the
// state to be loaded again.
func TestGroupFromSingleServerAlone(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	commit(t, s, set("kept", "v"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	_, err = Open(Options{Dir: dir, Logger: quiet(), Raft: &RaftOptions{ID: "a", Listener: rl,
		Peers: []Peer{{ID: "a", Addr: rl.Addr().String()}, {ID: "b", Addr: "127.0.0.1:1"}}}})
	if err == nil || !strings.Contains(err.Error(), "group of one") {
		t.Fatalf("a single server's directory as one of two first members: %v", err)
	}
	// A start that fails after Raft made its directory (an advertise
	// address that does not resolve).
	_, err = Open(Options{Dir: dir, Logger: quiet(), Raft: &RaftOptions{ID: "a", Listener: rl, Advertise: "no such host:1",
		Peers: []Peer{{ID: "a", Addr: rl.Addr().String()}}}})
	if err == nil {
		t.Fatal("a member with an advertise address that does not resolve started")
	}
	a := &member{id: "a", dir: dir, raftAddr: rl.Addr().String()}
	rl.Close()
	a.start(t, nil, []Peer{{ID: "a", Addr: a.raftAddr}})
	defer func() { a.s.Close() }()
	leader(t, []*member{a})
	if got := dump(a.s); !strings.Contains(got, "kept=v ") {
		t.Fatalf("after a failed first start, the state is %q", got)
	}
}

// TestGroupSecret: a member whose secret is wrong gets nothing of the
// group's records, even once the leader is told to add it.
func TestGroupSecret(t *testing.T) {
	ra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &member{id: "a", dir: t.TempDir(), raftAddr: ra.Addr().String(), secret: []byte("right")}
	a.start(t, ra, []Peer{{ID: "a", Addr: ra.Addr().String()}})
	defer func() { a.s.Close() }()
	leader(t, []*member{a})
	commit(t, a.s, set("private", "v"))

	rb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &member{id: "b", dir: t.TempDir(), raftAddr: rb.Addr().String(), secret: []byte("wrong")}
	b.start(t, rb, nil)
	defer func() { b.s.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The change may be committed (a, alone, is a majority of the old
	// configuration); b gets nothing either way.
	a.s.AddMember(ctx, "b", b.raftAddr)
	time.Sleep(time.Second)
	if got := dump(b.s); got != "" {
		t.Fatalf("the member with the wrong secret holds %q", got)
	}
	if st := b.s.Stats(); st.Raft == nil || st.Raft.State == "Leader" {
		t.Fatalf("the member with the wrong secret: %+v", st.Raft)
	}
}
