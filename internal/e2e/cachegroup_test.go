package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cacheMember is one mount of TestCacheGroup: its mount point and the
// address of its metrics.
type cacheMember struct {
	name, mnt, metrics string
	pid                int
}

// mountMember mounts v at m.mnt in a group, with metrics; extra flags
// follow.
func mountMember(t *testing.T, v *volume, m *cacheMember, extra ...string) {
	t.Helper()
	if err := os.MkdirAll(m.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m.metrics = freeAddr(t)
	args := append([]string{"mount", "-d", v.metaURL, m.mnt, "--log", v.log, "--cache-dir", filepath.Join(v.dir, "cache-"+m.name),
		"--cache-group", "train", "--cache-group-listen", "127.0.0.1:0", "--metrics", m.metrics}, extra...)
	m.pid = printedPID(mustSluice(t, args...))
	mnt, pid := m.mnt, m.pid
	t.Cleanup(func() {
		if mounted(mnt) {
			if r := sluice(t, "umount", mnt); r.code != 0 {
				sluice(t, "umount", "--force", mnt)
			}
		}
		endMountProcess(t, pid)
	})
}

// metric returns the value of a metric of m.
func (m *cacheMember) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, _ := scrapeFamilies(t, m.metrics).value(name, labels...)
	return v
}

// cacheFile is a file of the data set with the digest of its bytes.
type cacheFile struct {
	name string
	sum  [32]byte
}

// writeSet writes n files of size bytes under dir through mnt.
func writeSet(t *testing.T, mnt, dir string, n, size int, seed uint64) []cacheFile {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(mnt, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	var fs []cacheFile
	for i := range n {
		data := randomData(size, seed+uint64(i))
		name := filepath.Join(dir, fmt.Sprintf("part-%03d", i))
		if err := os.WriteFile(filepath.Join(mnt, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fs = append(fs, cacheFile{name, sha256.Sum256(data)})
	}
	return fs
}

// readSet reads every file of fs through mnt and reports the first
// error or mismatch.
func readSet(mnt string, fs []cacheFile) error {
	buf := make([]byte, 1<<20)
	for _, f := range fs {
		file, err := os.Open(filepath.Join(mnt, f.name))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.CopyBuffer(h, file, buf)
		file.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", f.name, err)
		}
		if !bytes.Equal(h.Sum(nil), f.sum[:]) {
			return fmt.Errorf("read %s through %s: wrong bytes", f.name, mnt)
		}
	}
	return nil
}

// objectGets sums the GETs the members sent to object storage.
func objectGets(t *testing.T, ms []*cacheMember) float64 {
	t.Helper()
	n := 0.0
	for _, m := range ms {
		n += m.metric(t, "sluice_object_requests_total", "op", "get")
	}
	return n
}

// TestCacheGroup mounts one volume on the S3 test server three times in
// one cache group and checks the promises of docs/cachegroup.md: a data
// set the three read is fetched from the bucket about once; a member
// killed while the others read costs no error and no wrong byte, and
// rejoins when mounted again; a block one member's writeback staged is
// read by the others before it is uploaded; a request without the
// group's key gets nothing.
func TestCacheGroup(t *testing.T) {
	v, _ := newS3Volume(t, "sluice-group-")

	ms := []*cacheMember{{name: "a"}, {name: "b"}, {name: "c"}}
	for _, m := range ms {
		m.mnt = filepath.Join(v.dir, "mnt-"+m.name)
		mountMember(t, v, m)
	}
	waitMembers(t, ms, 3)

	// 1 GiB in 64 files of 16 MiB: 256 blocks of 4 MiB.
	const files, size = 64, 16 << 20
	set := writeSet(t, ms[0].mnt, "set1", files, size, 1000)
	blocks := float64(files * size / (4 << 20))
	before := objectGets(t, ms)
	errs := make(chan error, len(ms))
	for _, m := range ms {
		go func() { errs <- readSet(m.mnt, set) }()
	}
	for range ms {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	gets := objectGets(t, ms) - before
	t.Logf("3 members read %d blocks: %.0f GETs from the bucket", int(blocks), gets)
	if gets > 1.1*blocks {
		t.Errorf("%.0f GETs for %.0f blocks read by 3 members: want at most 1.1 per block", gets, blocks)
	}
	var peerHits float64
	for _, m := range ms {
		peerHits += m.metric(t, "sluice_cachegroup_hits_total")
	}
	if peerHits < blocks {
		t.Errorf("peers served %.0f reads; the 3 members read %.0f blocks each", peerHits, blocks)
	}

	t.Run("warmup fills the group once", func(t *testing.T) {
		set3 := writeSet(t, ms[2].mnt, "set3", 8, size, 4000)
		before := objectGets(t, ms)
		mustSluice(t, "warmup", "--cache-group", filepath.Join(ms[1].mnt, "set3"))
		warmed := objectGets(t, ms) - before
		if want := float64(8 * size / (4 << 20)); warmed < want || warmed > 1.1*want {
			t.Errorf("warmup of %.0f blocks sent %.0f GETs; want each block fetched once, by its owner", want, warmed)
		}
		for _, m := range ms {
			if err := readSet(m.mnt, set3); err != nil {
				t.Fatal(err)
			}
		}
		if got := objectGets(t, ms) - before - warmed; got != 0 {
			t.Errorf("reads after the warmup sent %.0f GETs, want none", got)
		}
	})

	t.Run("member killed", func(t *testing.T) {
		set2 := writeSet(t, ms[1].mnt, "set2", 16, size, 2000)
		var wg sync.WaitGroup
		readErrs := make([]error, 2)
		for i, m := range ms[1:] {
			wg.Go(func() { readErrs[i] = readSet(m.mnt, set2) })
		}
		time.Sleep(300 * time.Millisecond)
		if err := syscall.Kill(ms[0].pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, err := range readErrs {
			if err != nil {
				t.Errorf("a read failed while a member was killed: %v", err)
			}
		}
		sluice(t, "umount", "--force", ms[0].mnt)
		// The reads took seconds: the killed member's share of what
		// was left was asked of it after its end.
		if f := ms[1].metric(t, "sluice_cachegroup_failures_total") + ms[2].metric(t, "sluice_cachegroup_failures_total"); f == 0 {
			t.Error("no member noticed the killed one")
		}
		// Every byte again, now the dead member's share is the others'.
		for _, m := range ms[1:] {
			if err := readSet(m.mnt, set); err != nil {
				t.Error(err)
			}
		}
	})

	top := t
	t.Run("restarted member rejoins and serves staged blocks", func(t *testing.T) {
		// Uploads of the restarted member wait a minute: what it
		// writes with --writeback is only in its cache meanwhile.
		top.Setenv("SLUICE_FAULTS", "put:delay=60s")
		mountMember(top, v, ms[0], "--writeback")
		top.Setenv("SLUICE_FAULTS", "")
		waitMembers(t, ms, 3)
		staged := writeSet(t, ms[0].mnt, "staged", 2, 9<<20+123, 3000)
		if n := ms[0].metric(t, "sluice_staging_blocks"); n == 0 {
			t.Fatal("the writeback member staged no block")
		}
		for _, m := range ms[1:] {
			if err := readSet(m.mnt, staged); err != nil {
				t.Errorf("a block staged by a member, not uploaded yet: %v", err)
			}
		}
		if ms[0].metric(t, "sluice_cachegroup_served_total") == 0 {
			t.Error("the restarted member served nothing")
		}
		if t.Failed() {
			t.Logf("log:\n%s", readFile(t, v.log))
		}
	})

	t.Run("request without the key", func(t *testing.T) {
		out := mustSluice(t, "status", v.metaURL)
		var st struct {
			Sessions []struct {
				CacheGroup *struct{ Addr string }
			}
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range st.Sessions {
			if s.CacheGroup == nil {
				continue
			}
			n++
			resp, err := http.Get("http://" + s.CacheGroup.Addr + "/block?key=chunks/0/0/1_0_4194304&off=0&len=4096")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a request without the key got %s, want 401", resp.Status)
			}
		}
		if n != 3 {
			t.Errorf("status lists %d members of the cache group, want 3:\n%s", n, out)
		}
	})
}

// waitMembers waits until every mounted member sees n members.
func waitMembers(t *testing.T, ms []*cacheMember, n float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range ms {
		for m.metric(t, "sluice_cachegroup_members") != n {
			if time.Now().After(deadline) {
				t.Fatalf("member %s sees %.0f members, want %.0f", m.name, m.metric(t, "sluice_cachegroup_members"), n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
