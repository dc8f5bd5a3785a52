package sluice_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/metaserver"
)

// The benchmarks measure, besides time, what each operation costs the
// server: with SLUICE_BENCH_SERVER=process the server runs in a child
// process (this test binary again, serving), and the meter reports its
// CPU per operation (server-cpu-µs/op) from /proc; otherwise the server
// runs in this process and the meter reports the requests, commits and
// log syncs per operation from its metrics, and the CPU of client and
// server together (cpu-µs/op).

// serveEnv, set in a child's environment, names the directory it serves.
const serveEnv = "SLUICE_BENCH_SERVE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		os.Exit(serveChild(dir))
	}
	os.Exit(m.Run())
}

// serveChild serves dir on a loopback port, which it prints, until its
// standard input ends.
func serveChild(dir string) int {
	srv, err := metaserver.Open(metaserver.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go srv.Serve(l)
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// benchServer is the server the running benchmark uses: in this process
// (srv) or in a child (pid).
type benchServer struct {
	srv *metaserver.Server
	pid int
}

// current is the server of the benchmark running now (benchmarks run
// one at a time).
var current benchServer

// startChild runs a server in a child process and returns its URL.
func startChild(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("server process: %v", err)
		}
	})
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("server process: %v", err)
	}
	current = benchServer{pid: cmd.Process.Pid}
	return "sluice://" + strings.TrimSpace(addr) + "/test"
}

// meter is the benchmarks' metatest.Meter.
func meter(b *testing.B) func(ops int) {
	s := current
	cpu0 := processCPU(b, s.pid)
	m0 := serverCounts(b, s.srv)
	return func(ops int) {
		b.StopTimer()
		defer b.StartTimer()
		n := float64(ops)
		cpu := processCPU(b, s.pid) - cpu0
		if s.pid != 0 {
			b.ReportMetric(float64(cpu.Microseconds())/n, "server-cpu-µs/op")
			return
		}
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/op")
		m := serverCounts(b, s.srv)
		b.ReportMetric((m.reads-m0.reads)/n, "reads/op")
		b.ReportMetric((m.commits-m0.commits)/n, "commits/op")
		if syncs := m.syncs - m0.syncs; syncs > 0 {
			b.ReportMetric(syncs/n, "syncs/op")
			b.ReportMetric((m.syncTime-m0.syncTime)/syncs*1e6, "sync-µs")
		}
	}
}

// processCPU returns the user and system CPU time of process pid (0:
// this one).
func processCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the line, in clock ticks (100 a second
	// on Linux).
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// counts are totals from a server's metrics.
type counts struct {
	reads, commits, syncs, syncTime float64
}

func serverCounts(b *testing.B, srv *metaserver.Server) counts {
	var c counts
	if srv == nil {
		return c
	}
	mfs, err := srv.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sluice_metaserver_op_seconds":
			for _, m := range mf.GetMetric() {
				n := float64(m.GetHistogram().GetSampleCount())
				op := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" {
						op = l.GetValue()
					}
				}
				switch op {
				case "get", "get_follow", "scan":
					c.reads += n
				case "commit":
					c.commits += n
				}
			}
		case "sluice_metaserver_log_sync_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			c.syncs, c.syncTime = float64(h.GetSampleCount()), h.GetSampleSum()
		}
	}
	return c
}
