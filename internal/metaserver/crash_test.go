package metaserver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/metaserver"
)

// The crash test runs the server as a real process (this test binary,
// started again with serverEnv set) and kills it with SIGKILL.
const serverEnv = "SLUICE_TEST_METASERVER" // DIR,ADDR,CHECKPOINT-BYTES

func TestMain(m *testing.M) {
	if v := os.Getenv(serverEnv); v != "" {
		os.Exit(serveChild(v))
	}
	os.Exit(m.Run())
}

// serveChild runs the server of a child process until SIGTERM and
// returns the process's exit code.
func serveChild(v string) int {
	var dir, addr string
	var cp int64
	if _, err := fmt.Sscanf(v, "%s %s %d", &dir, &addr, &cp); err != nil {
		fmt.Fprintln(os.Stderr, "bad", serverEnv, v, err)
		return 2
	}
	srv, err := metaserver.Open(metaserver.Options{Dir: dir, CheckpointBytes: cp})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go srv.Serve(l)
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, syscall.SIGINT)
	<-done
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a server process.
type child struct {
	t    *testing.T
	cmd  *exec.Cmd
	dir  string
	addr string
}

func startChild(t *testing.T, dir, addr string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", serverEnv, dir, addr, 64<<10))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, dir: dir, addr: addr}
	for i := 0; ; i++ {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			return c
		}
		if i > 500 {
			cmd.Process.Kill()
			t.Fatalf("server did not start: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) stop(sig syscall.Signal) {
	c.t.Helper()
	c.cmd.Process.Signal(sig)
	err := c.cmd.Wait()
	if sig == syscall.SIGTERM && err != nil {
		c.t.Fatalf("server stopped with SIGTERM: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestKilledInALoop kills the server with SIGKILL again and again while
// clients create, rename and remove files through the POSIX core, and
// checks after each start that every acknowledged change is there, no
// other, and that the volume checks clean.
func TestKilledInALoop(t *testing.T) {
	ctx := context.Background()
	dir, addr := t.TempDir(), freeAddr(t)
	srv := startChild(t, dir, addr)
	url := "sluice://" + addr + "/crash"
	db, err := sluice.Open(ctx, url, true)
	if err != nil {
		t.Fatal(err)
	}
	st := kvstore.New(db)
	defer st.Close()
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "crash", UUID: "crash-test", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}

	// Each worker owns its names: the set a worker was told succeeded is
	// exactly what must be in the directory.
	const workers = 4
	var mu sync.Mutex
	live := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []string
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				var err error
				switch op := rng.IntN(10); {
				case op < 6 || len(mine) == 0:
					_, err = c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
					if err == nil {
						mine = append(mine, name)
						mu.Lock()
						live[name] = true
						mu.Unlock()
					}
				case op < 8:
					j := rng.IntN(len(mine))
					old := mine[j]
					err = c.Rename(ctx, meta.RootIno, []byte(old), meta.RootIno, []byte(name+"r"), 0)
					if err == nil {
						mine[j] = name + "r"
						mu.Lock()
						delete(live, old)
						live[name+"r"] = true
						mu.Unlock()
					}
				default:
					j := rng.IntN(len(mine))
					old := mine[j]
					err = c.Unlink(ctx, meta.RootIno, []byte(old))
					if err == nil {
						mine = append(mine[:j], mine[j+1:]...)
						mu.Lock()
						delete(live, old)
						mu.Unlock()
					}
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d, op %d (%s): %w", w, i, name, err)
					return
				}
			}
		}(w)
	}

	check := func(round int) {
		t.Helper()
		mu.Lock()
		want := make([]string, 0, len(live))
		for n := range live {
			want = append(want, n)
		}
		mu.Unlock()
		sort.Strings(want)
		es, err := c.ReadDir(ctx, meta.RootIno, nil, 1<<20, false)
		if err != nil {
			t.Fatalf("round %d: readdir: %v", round, err)
		}
		var got []string
		for _, e := range es {
			got = append(got, string(e.Name))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %d names in the root, %d acknowledged:\n got %v\nwant %v", round, len(got), len(want), got, want)
		}
		res, err := meta.Check(ctx, st, meta.CheckOptions{OnDamage: func(d meta.Damage) { t.Errorf("round %d: %v", round, d) }})
		if err != nil || res.Damages != 0 {
			t.Fatalf("round %d: check: %v, %d damages", round, err, res.Damages)
		}
	}

	rounds := 8
	for r := 0; r < rounds; r++ {
		time.Sleep(time.Duration(150+rand.IntN(350)) * time.Millisecond)
		srv.stop(syscall.SIGKILL)
		srv = startChild(t, dir, addr)
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	// Everything acknowledged before the last kill is back, and a clean
	// stop and start (final checkpoint) keeps it.
	check(rounds)
	srv.stop(syscall.SIGKILL)
	srv = startChild(t, dir, addr)
	check(rounds + 1)
	srv.stop(syscall.SIGTERM)
	srv = startChild(t, dir, addr)
	check(rounds + 2)
	mu.Lock()
	n := len(live)
	mu.Unlock()
	if n < 50 {
		t.Fatalf("only %d files live at the end: the workload hardly ran", n)
	}
	t.Logf("%d files live after %d kills", n, rounds+1)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	srv.stop(syscall.SIGTERM)
}
