package cachegroup

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/mem"
)

const blockSize = 1 << 20

// counting is an object store that counts the GETs of each key.
type counting struct {
	object.Store
	mu   sync.Mutex
	gets map[string]int
}

func (c *counting) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Store.Get(ctx, key, off, limit)
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.gets {
		n += v
	}
	return n
}

// member is one member of a test group: a chunk store with a disk cache
// of its own over the shared bucket, and its Group.
type member struct {
	store *chunk.Store
	group *Group
	dir   string
	wrap  func(http.Handler) http.Handler // wraps what the member serves, when set
}

// cluster is a test group over one bucket.
type cluster struct {
	bucket  *counting
	members []*member
	list    atomic.Pointer[[]Member]
}

type slice struct {
	id   uint64
	data []byte
}

// newCluster starts n members with key, and writes slices of data
// through a store that is no member (so no member has them cached).
func newCluster(t testing.TB, n int, key []byte, seal bool, slices int) (*cluster, []slice) {
	return newClusterWith(t, n, key, seal, slices, 0, blockSize)
}

// useTLS makes the members newCluster starts use TLS (set by a test).
var useTLS bool

// newClusterWith is newCluster with members whose memory caches hold
// memSize bytes (0: the default), and blocks of bs bytes.
func newClusterWith(t testing.TB, n int, key []byte, seal bool, slices int, memSize int64, bs int) (*cluster, []slice) {
	t.Helper()
	c := &cluster{bucket: &counting{Store: mem.New("test"), gets: map[string]int{}}}
	writer, err := chunk.Open(c.bucket, chunk.Config{BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var ss []slice
	for i := range slices {
		s := slice{id: uint64(100 + i), data: make([]byte, 3*bs+bs/3)}
		for j := range s.data {
			s.data[j] = byte(rng.Uint32())
		}
		err := writer.WriteSliceFunc(context.Background(), s.id, uint32(len(s.data)), func(_ context.Context, off uint32, p []byte) error {
			copy(p, s.data[off:])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	var list []Member
	var lns []net.Listener
	for i := range n {
		m := &member{dir: t.TempDir()}
		m.store, err = chunk.Open(c.bucket, chunk.Config{BlockSize: bs, CacheDirs: []string{m.dir}, VolumeUUID: "vol", MaxReadahead: 4 * int64(bs), MemoryCacheSize: memSize})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		self := Member{ID: fmt.Sprintf("m%d", i), Addr: ln.Addr().String(), Weight: 1}
		list = append(list, self)
		m.group, err = New(Config{Name: "g", Self: self, Key: key, Seal: seal, TLS: useTLS, Timeout: time.Second,
			Members: func(context.Context) ([]Member, error) { return *c.list.Load(), nil }}, m.store)
		if err != nil {
			t.Fatal(err)
		}
		m.store.SetPeers(m.group)
		c.members = append(c.members, m)
	}
	c.list.Store(&list)
	for i, m := range c.members {
		m.start(t, lns[i])
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.group.Close()
			m.store.Close(context.Background())
		}
	})
	return c, ss
}

// start serves the member's peers on ln, through m.wrap when set.
func (m *member) start(t testing.TB, ln net.Listener) {
	t.Helper()
	m.group.Start(context.Background(), ln)
	if m.wrap != nil {
		m.group.srv.Handler = m.wrap(m.group)
	}
}

// readAll reads every slice through s in reads of size n and checks the
// bytes.
func readAll(t *testing.T, s *chunk.Store, ss []slice, n int) {
	t.Helper()
	for _, sl := range ss {
		for off := 0; off < len(sl.data); off += n {
			p := make([]byte, min(n, len(sl.data)-off))
			if err := s.ReadSlice(context.Background(), sl.id, uint32(len(sl.data)), uint32(off), p); err != nil {
				t.Fatalf("read slice %d at %d: %v", sl.id, off, err)
			}
			if !bytes.Equal(p, sl.data[off:off+len(p)]) {
				t.Fatalf("slice %d at %d: wrong bytes", sl.id, off)
			}
		}
	}
}

func blocksOf(ss []slice) int {
	n := 0
	for _, s := range ss {
		n += (len(s.data) + blockSize - 1) / blockSize
	}
	return n
}

var testKey = DeriveKey("uuid", "secret", "", "g")

func TestEachBlockFetchedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		seal bool
		read int
	}{
		{"whole blocks", false, blockSize},
		{"4KiB reads", false, 4 << 10},
		{"sealed", true, 256 << 10},
		{"tls", false, 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			useTLS = tc.name == "tls"
			defer func() { useTLS = false }()
			c, ss := newCluster(t, 3, testKey, tc.seal, 4)
			before := c.bucket.total()
			var wg sync.WaitGroup
			for _, m := range c.members {
				wg.Go(func() { readAll(t, m.store, ss, tc.read) })
			}
			wg.Wait()
			blocks := blocksOf(ss)
			if got := c.bucket.total() - before; got > blocks+blocks/10 {
				t.Errorf("%d GETs for %d blocks read by 3 members; want about one per block", got, blocks)
			}
			var hits, served uint64
			for _, m := range c.members {
				st := m.group.Stats()
				hits += st.Hits
				served += st.Served
				if st.Failures != 0 || st.Corrupt != 0 || st.Refused != 0 {
					t.Errorf("member %s: %+v", m.group.conf.Self.ID, st)
				}
				if len(st.Members) != 3 {
					t.Errorf("member %s sees %d members", m.group.conf.Self.ID, len(st.Members))
				}
			}
			if hits == 0 || served < hits {
				t.Errorf("peers served %d reads, answered %d requests", hits, served)
			}
		})
	}
}

func TestDeadMemberCostsNoError(t *testing.T) {
	c, ss := newCluster(t, 3, testKey, false, 4)
	dead := c.members[2]
	dead.group.Close()
	for _, m := range c.members[:2] {
		readAll(t, m.store, ss, 64<<10)
		st := m.group.Stats()
		var down bool
		for _, ms := range st.Members {
			if ms.ID == dead.group.conf.Self.ID {
				down = ms.Down
			}
		}
		if !down {
			t.Errorf("member %s does not see the dead member as down: %+v", m.group.conf.Self.ID, st.Members)
		}
	}
	// The dead member's share went to the two others: between them,
	// each block was fetched about once after the first failure.
	if got, blocks := c.bucket.total(), blocksOf(ss); got > blocks+blocks/2 {
		t.Errorf("%d GETs for %d blocks: the dead member's share was not taken over", got, blocks)
	}
}

// TestSlowMember checks that a peer that does not answer costs a bounded
// wait and no error.
func TestSlowMember(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c, ss := newCluster(t, 1, testKey, false, 2)
	m := c.members[0]
	m.group.setMembers([]Member{{ID: "zz-silent", Addr: ln.Addr().String(), Weight: 1000}})
	c.list.Store(&[]Member{{ID: "zz-silent", Addr: ln.Addr().String(), Weight: 1000}})
	start := time.Now()
	readAll(t, m.store, ss, blockSize)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("reads took %v with a silent peer; each wait should be bounded by %v", d, m.group.conf.Timeout)
	}
	if st := m.group.Stats(); st.Failures == 0 {
		t.Errorf("no failure counted against the silent peer: %+v", st)
	}
}

func TestWrongKeyRefused(t *testing.T) {
	c, ss := newCluster(t, 2, testKey, false, 1)
	m := c.members[0]
	key := chunk.BlockKey(ss[0].id, 0, blockSize, false)
	for _, tc := range []struct {
		name, auth string
	}{
		{"none", ""},
		{"garbage", "x:y"},
		{"other key", newSigner(DeriveKey("uuid", "other secret", "", "g")).sign("/block?key="+key+"&len=4096&off=0", time.Now())},
		{"old", newSigner(testKey).sign("/block?key="+key+"&len=4096&off=0", time.Now().Add(-time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+m.group.conf.Self.Addr+"/block?key="+key+"&len=4096&off=0", nil)
			if tc.auth != "" {
				req.Header.Set(authHeader, tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %s, want 401", resp.Status)
			}
			if bytes.Contains(body, ss[0].data[:64]) {
				t.Error("the reply holds the block's bytes")
			}
		})
	}
	if got := m.group.Stats().Refused; got != 4 {
		t.Errorf("refused %d requests, want 4", got)
	}
	if c.bucket.total() != 0 {
		t.Errorf("a refused request read the bucket")
	}
	// A member with another key is refused too, and reads the bucket.
	other, err := New(Config{Name: "g", Self: Member{ID: "stranger", Addr: "127.0.0.1:1", Weight: 1},
		Key: DeriveKey("uuid", "other", "", "g")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)
	if err := other.get(context.Background(), m.group.conf.Self.Addr, key, 0, p, false); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a member with another key got %v, want a refusal", err)
	}
}

// flipper corrupts one byte of every reply body.
type flipper struct{ http.ResponseWriter }

func (f flipper) Write(p []byte) (int, error) {
	q := bytes.Clone(p)
	q[len(q)/2] ^= 0x40
	return f.ResponseWriter.Write(q)
}

func TestCorruptReplyDropped(t *testing.T) {
	for _, seal := range []bool{false, true} {
		t.Run(fmt.Sprint("seal=", seal), func(t *testing.T) {
			c, ss := newCluster(t, 2, testKey, seal, 2)
			for _, m := range c.members {
				m.group.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					m.group.ServeHTTP(flipper{w}, r)
				})
			}
			for _, m := range c.members {
				readAll(t, m.store, ss, 128<<10)
			}
			var bad uint64
			for _, m := range c.members {
				st := m.group.Stats()
				bad += st.Failures
				if st.Hits != 0 {
					t.Errorf("member %s took %d corrupt replies", m.group.conf.Self.ID, st.Hits)
				}
			}
			if bad == 0 {
				t.Error("no corrupt reply was counted")
			}
		})
	}
}

// TestCorruptCacheFileAtOwner checks that a block whose file in the
// owner's disk cache went bad is never served: the owner's cache checks
// its pages, drops the file and fetches the block again.
func TestCorruptCacheFileAtOwner(t *testing.T) {
	c, ss := newCluster(t, 2, testKey, false, 2)
	a, b := c.members[0], c.members[1]
	readAll(t, a.store, ss, blockSize) // a caches its share, b's share in memory only
	a.store.FlushCache()
	n := 0
	err := filepath.Walk(a.dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || info.Size() < 8192 {
			return err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteAt([]byte("corrupt!"), 4096+17)
		n++
		return err
	})
	if err != nil || n == 0 {
		t.Fatalf("corrupted %d cache files: %v", n, err)
	}
	a.store.FlushCache()
	readAll(t, b.store, ss, 4<<10)
	readAll(t, b.store, ss, blockSize)
}

// TestFind checks that a member finds a block in another's cache, and
// only there.
func TestFind(t *testing.T) {
	c, ss := newCluster(t, 3, testKey, false, 1)
	ref := chunk.BlockRef{ID: ss[0].id, Index: 1, Len: blockSize}
	key := ref.Key()
	p := make([]byte, blockSize)
	if c.members[0].group.Find(context.Background(), key, p) {
		t.Fatal("found a block no member has cached")
	}
	if _, err := c.members[0].store.Warm(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	var finder *member
	holders := 0
	for _, m := range c.members {
		if m.store.Cached(ref) {
			holders++
		} else {
			finder = m
		}
	}
	if holders != 1 || finder == nil {
		t.Fatalf("warming put the block in %d caches, want 1 (its owner's)", holders)
	}
	gets := c.bucket.total()
	if !finder.group.Find(context.Background(), key, p) {
		t.Fatal("did not find a block another member has cached")
	}
	if !bytes.Equal(p, ss[0].data[blockSize:2*blockSize]) {
		t.Error("found wrong bytes")
	}
	if c.bucket.total() != gets {
		t.Error("Find read the bucket")
	}
}

func TestRingShares(t *testing.T) {
	ms := []Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 2}, {ID: "d", Weight: 0}}
	r := newRing(ms)
	all := func(int) bool { return true }
	counts := map[string]int{}
	owners := map[string]string{}
	const keys = 40000
	for i := range keys {
		k := chunk.BlockKey(uint64(i/4), i%4, 4<<20, false)
		o := r.members[r.owner(k, all)].ID
		counts[o]++
		owners[k] = o
	}
	if counts["d"] != 0 {
		t.Errorf("a member of weight 0 owns %d keys", counts["d"])
	}
	for id, want := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
		if got := float64(counts[id]) / keys; got < want-0.02 || got > want+0.02 {
			t.Errorf("member %s owns %.3f of the keys, want %.2f", id, got, want)
		}
	}
	// Without b, only b's keys move.
	r2 := newRing([]Member{ms[0], ms[2]})
	for k, o := range owners {
		if n := r2.members[r2.owner(k, all)].ID; o != "b" && n != o {
			t.Fatalf("key %s moved from %s to %s when b left", k, o, n)
		}
	}
	// Leaving a member out (down) is the same as removing it.
	for k, o := range owners {
		i := r.owner(k, func(i int) bool { return r.members[i].ID != "b" })
		if n := r.members[i].ID; o != "b" && n != o {
			t.Fatalf("key %s moved from %s to %s when b was down", k, o, n)
		}
	}
}

func TestDeriveKey(t *testing.T) {
	base := DeriveKey("u", "s", "e", "g")
	for _, k := range [][]byte{DeriveKey("u", "s", "e", "h"), DeriveKey("u", "s", "", "g"), DeriveKey("u", "", "s", "g"), DeriveKey("us", "", "e", "g")} {
		if bytes.Equal(k, base) {
			t.Error("different settings derive the same key")
		}
	}
	if !bytes.Equal(base, DeriveKey("u", "s", "e", "g")) {
		t.Error("the same settings derive different keys")
	}
}

// TestTLSRefusesStrangers checks that a member serving over TLS refuses
// a connection from a host without the group's certificate, and one
// whose certificate comes from another key.
func TestTLSRefusesStrangers(t *testing.T) {
	useTLS = true
	c, ss := newCluster(t, 2, testKey, false, 1)
	useTLS = false
	addr := c.members[0].group.conf.Self.Addr
	key := chunk.BlockKey(ss[0].id, 0, blockSize, false)
	_, other, err := tlsConfigs(DeriveKey("uuid", "other", "", "g"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]*tls.Config{
		"no certificate": {InsecureSkipVerify: true},
		"another key":    other,
	} {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := client.Get("https://" + addr + "/block?key=" + key + "&off=0&len=4096")
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: connected and got %s", name, resp.Status)
		}
	}
	// Members with the key read from each other.
	readAll(t, c.members[1].store, ss, 64<<10)
	if c.members[1].group.Stats().Hits == 0 && c.members[0].group.Stats().Hits == 0 {
		t.Error("no member read from the other over TLS")
	}
}

// TestRestartedMember checks that a member listed twice (its old session
// and its new one) is reached where the first entry says, and that a
// down mark of a member ends when it comes back at another address.
func TestRestartedMember(t *testing.T) {
	g, err := New(Config{Name: "g", Self: Member{ID: "self", Addr: "127.0.0.1:1", Weight: 0}, Key: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.setMembers([]Member{{ID: "peer", Addr: "127.0.0.1:2", Weight: 1}})
	g.failed(Member{ID: "peer", Addr: "127.0.0.1:2"}, fmt.Errorf("refused"))
	if g.Remote("chunks/0/0/1_0_4096") {
		t.Fatal("a member left out still owns blocks")
	}
	g.setMembers([]Member{{ID: "peer", Addr: "127.0.0.1:3", Weight: 1}, {ID: "peer", Addr: "127.0.0.1:2", Weight: 1}})
	m, ok := g.owner("chunks/0/0/1_0_4096")
	if !ok || m.Addr != "127.0.0.1:3" {
		t.Errorf("owner %+v (%v), want the peer at its new address", m, ok)
	}
}
