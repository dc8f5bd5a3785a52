package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sluiceengine "github.com/sluicefs/sluice/internal/meta/engine/sluice"
)

// groupMember is one `sluice meta-server` process of a replicated group.
type groupMember struct {
	id, dir, addr, raft string
	ms                  *metaServer
}

// run starts the member's process with flags, after its own.
func (m *groupMember) run(t *testing.T, flags ...string) {
	t.Helper()
	m.ms = runMetaServer(t, m.dir, m.addr, append([]string{"--id", m.id, "--raft-listen", m.raft, "--raft-heartbeat", "500ms"}, flags...)...)
}

// memberState is what a member says of itself (metaserver.Stats).
type memberState struct {
	Index          uint64
	Digest         string
	AnyMemberReads uint64
	Raft           struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
}

// groupStates asks every member of url for its figures; a member that
// does not answer has none.
func groupStates(t *testing.T, url string, digest bool) []*memberState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sluiceengine.Open(ctx, url, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []*memberState
	for _, r := range db.Members(ctx, digest) {
		if r.Error != "" {
			out = append(out, nil)
			continue
		}
		st := &memberState{}
		if err := json.Unmarshal(r.Stats, st); err != nil {
			t.Fatal(err)
		}
		out = append(out, st)
	}
	return out
}

// startMetaGroup runs a group of three `sluice meta-server` processes on
// loopback, each with a data directory under dir, until the test ends
// (then stops each with SIGTERM, which must end it cleanly), and returns
// the URL of a volume on them.
func startMetaGroup(t *testing.T, dir string) string {
	t.Helper()
	ms, peers, url := newGroup(t, dir, 3)
	for _, m := range ms {
		m.run(t, "--peers", peers)
		t.Cleanup(func() { m.ms.stop(t, syscall.SIGTERM) })
	}
	groupLeader(t, url, ms)
	return url
}

// newGroup returns n members of a group, not started, with data
// directories under dir and free addresses on loopback; the --peers list
// that starts them; and the URL of a volume on them.
func newGroup(t *testing.T, dir string, n int) (ms []*groupMember, peers, url string) {
	t.Helper()
	var ps, addrs []string
	for i := range n {
		m := &groupMember{id: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, fmt.Sprintf("member%d", i)), addr: freeAddr(t), raft: freeAddr(t)}
		ms = append(ms, m)
		ps = append(ps, m.id+"="+m.raft)
		addrs = append(addrs, m.addr)
	}
	return ms, strings.Join(ps, ","), "sluice://" + strings.Join(addrs, ",") + "/vol"
}

// groupLeader returns the member of ms that leads, waiting for one.
func groupLeader(t *testing.T, url string, ms []*groupMember) *groupMember {
	t.Helper()
	var found *groupMember
	eventuallyWithin(t, 20*time.Second, "a member leads", func() error {
		for i, st := range groupStates(t, url, false) {
			if st != nil && st.Raft.State == "Leader" {
				found = ms[i]
				return nil
			}
		}
		return fmt.Errorf("no member says it leads")
	})
	return found
}

// TestMetaGroupFaults runs a workload of creates, writes, renames,
// truncates and unlinks through two mounts of a volume whose metadata a
// group of three `sluice meta-server` processes replicates, while the
// test kills the leader (SIGKILL) and starts it again, pauses the leader
// (SIGSTOP) past the election timeout and resumes it, and replaces a
// member with one on a fresh data directory. No operation fails; every
// one acknowledged is there afterwards; fsck finds nothing wrong; and
// every member holds the same records (the same digest at the same
// index). The log gives the longest an operation waited, the stall a
// failover costs applications.
func TestMetaGroupFaults(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	ms, peers, url := newGroup(t, dir, 3)
	for _, m := range ms {
		m.run(t, "--peers", peers)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.ms.cmd.Process.Signal(syscall.SIGCONT)
			m.ms.stop(t, syscall.SIGKILL)
		}
	})
	v := &volume{dir: dir, metaURL: url, bucket: filepath.Join(dir, "bucket"),
		mnt: filepath.Join(dir, "mnt"), log: filepath.Join(dir, "mount.log")}
	mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket, "--trash-days", "0")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range append([]string{v.log}, func() (ls []string) {
			for _, m := range ms {
				ls = append(ls, m.ms.log)
			}
			return ls
		}()...) {
			data, _ := os.ReadFile(p)
			if len(data) > 6000 {
				data = data[len(data)-6000:]
			}
			t.Logf("the end of %s:\n%s", filepath.Base(p), data)
		}
	})
	a, b := v.mnt, filepath.Join(dir, "mnt2")
	v.mountAt(t, a)
	v.mountAt(t, b)

	// The workload: on each mount, files made, written, renamed,
	// truncated and removed; want is what each name must hold after.
	var mu sync.Mutex
	want := map[string]string{}
	// The longest an operation waited in each phase: the first the kill
	// of the leader, the second its pause, the third the replacement.
	var longest [3]time.Duration
	phase := 0
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for w, mnt := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := func(what string, fn func() error) bool {
				start := time.Now()
				err := fn()
				mu.Lock()
				longest[phase] = max(longest[phase], time.Since(start))
				mu.Unlock()
				if err != nil {
					errs <- fmt.Errorf("mount %d: %s: %w", w, what, err)
					return false
				}
				return true
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				name := fmt.Sprintf("w%d-%05d", w, i)
				p := filepath.Join(mnt, name)
				content := fmt.Sprintf("%s written at %s\n", name, time.Now().Format(time.RFC3339Nano))
				if !step("create "+name, func() error { return os.WriteFile(p, []byte(content), 0o644) }) {
					return
				}
				final := name
				switch {
				case i%7 == 6:
					if !step("unlink "+name, func() error { return os.Remove(p) }) {
						return
					}
					final, content = "", ""
				case i%5 == 4:
					if !step("truncate "+name, func() error { return os.Truncate(p, 5) }) {
						return
					}
					content = content[:5]
				case i%3 == 2:
					final = name + ".renamed"
					if !step("rename "+name, func() error { return os.Rename(p, filepath.Join(mnt, final)) }) {
						return
					}
				}
				if final != "" {
					mu.Lock()
					want[final] = content
					mu.Unlock()
				}
			}
		}()
	}

	time.Sleep(time.Second)
	// 1. The leader is killed, and started again on its directory.
	l := groupLeader(t, url, ms)
	t.Logf("killing the leader %s", l.id)
	l.ms.stop(t, syscall.SIGKILL)
	time.Sleep(1500 * time.Millisecond)
	l.run(t, "--peers", peers)
	time.Sleep(time.Second)
	// 2. The leader is paused past the election timeout, then resumed:
	// it must find it no longer leads and serve nothing stale.
	l = groupLeader(t, url, ms)
	mu.Lock()
	phase = 1
	mu.Unlock()
	t.Logf("pausing the leader %s for 3s", l.id)
	l.ms.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * time.Second)
	l.ms.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(time.Second)
	// 3. A follower is replaced by a member on a fresh data directory
	// (at the same addresses, so the URL stays).
	l = groupLeader(t, url, ms)
	mu.Lock()
	phase = 2
	mu.Unlock()
	var f *groupMember
	for _, m := range ms {
		if m != l {
			f = m
			break
		}
	}
	t.Logf("replacing the follower %s", f.id)
	f.ms.stop(t, syscall.SIGKILL)
	mustSluice(t, "meta-server", "remove-member", url, f.id)
	f.id, f.dir = f.id+"b", f.dir+"b"
	f.run(t)
	mustSluice(t, "meta-server", "add-member", url, f.id, f.raft)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d names kept through the faults; the longest an operation took: %v with the leader killed, %v with it paused for 3s, %v with a member replaced",
		len(want), longest[0].Round(time.Millisecond), longest[1].Round(time.Millisecond), longest[2].Round(time.Millisecond))

	// Every acknowledged change is there, seen from both mounts.
	for _, mnt := range []string{a, b} {
		ents, err := os.ReadDir(mnt)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") { // the mount's own files
				got[e.Name()] = true
			}
		}
		for name, content := range want {
			data, err := os.ReadFile(filepath.Join(mnt, name))
			if err != nil || string(data) != content {
				t.Errorf("%s in %s: %q, %v; want %q", name, mnt, data, err, content)
			}
			delete(got, name)
		}
		for name := range got {
			t.Errorf("%s in %s: there, but it was renamed or removed", name, mnt)
		}
	}
	for _, mnt := range []string{a, b} {
		if r := sluice(t, "umount", mnt); r.code != 0 {
			t.Fatalf("umount %s: %s", mnt, r.stderr)
		}
	}
	mustSluice(t, "fsck", v.metaURL)

	// The members hold the same records.
	eventuallyWithin(t, 30*time.Second, "members hold the same records", func() error {
		sts := groupStates(t, url, true)
		for i, st := range sts {
			if st == nil {
				return fmt.Errorf("member %s does not answer", ms[i].id)
			}
			if st.Index != sts[0].Index || st.Digest != sts[0].Digest {
				return fmt.Errorf("member %s: index %d digest %.12s; member %s: index %d digest %.12s",
					ms[i].id, st.Index, st.Digest, ms[0].id, sts[0].Index, sts[0].Digest)
			}
		}
		return nil
	})
}
