package etcd_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicefs/sluice/internal/meta/engine/etcd"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"

	"github.com/sluicefs/sluice/internal/testserver"
)

// startEtcd starts a throwaway single-member etcd from PATH with its
// default limits, stopped when t ends, and returns its HOST:PORT. The
// shared test servers cannot serve here: these tests enable
// authentication, and CI may raise --max-txn-ops on the shared ones.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testserver.Missing(t, "no etcd binary on PATH", "apt-get install etcd-server")
	}
	client, peer := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--name", "throwaway", "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "throwaway=http://"+peer)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	cli := rawClient(t, client, "", "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd on %s not ready after 30s: %v\n%s", client, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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

func rawClient(t *testing.T, addr, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Username: user, Password: password,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestTooManyOps checks that a commit over etcd's default --max-txn-ops
// fails with an error naming the flag, and one under it succeeds.
func TestTooManyOps(t *testing.T) {
	ctx := context.Background()
	addr := startEtcd(t)
	db, err := etcd.Open(ctx, "etcd://"+addr+"/vol", true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	write := func(n int) error {
		return db.Update(ctx, func(tx kvstore.Txn) error {
			for i := range n {
				tx.Set([]byte(fmt.Sprintf("k%04d", i)), []byte("v"))
			}
			return nil
		})
	}
	if err := write(128); err != nil {
		t.Fatalf("commit of 128 writes: %v", err)
	}
	err = write(129)
	t.Logf("commit of 129 writes: %v", err)
	if err == nil || !strings.Contains(err.Error(), "--max-txn-ops") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("commit of 129 writes: %v", err)
	}
}

// TestAuth checks the messages for a wrong password, missing credentials
// and a user without permission, and that the right password works.
func TestAuth(t *testing.T) {
	ctx := context.Background()
	addr := startEtcd(t)
	cli := rawClient(t, addr, "", "")
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up authentication: %v", err)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"etcd://root:wrongpw@" + addr + "/vol", `rejected user "root": wrong user name or password`},
		{"etcd://" + addr + "/vol", "requires authentication"},
		{"etcd://alice:alicepw@" + addr + "/vol", `user "alice" may not read prefix "vol": permission denied`},
	} {
		db, err := etcd.Open(ctx, c.url, true)
		if err == nil {
			db.Close()
			t.Fatalf("open %s succeeded", c.url)
		}
		t.Logf("open %s: %v", c.url, err)
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "pw") || strings.Contains(msg, "\n") {
			t.Errorf("open %s: %v (want %q)", c.url, err, c.want)
		}
	}
	db, err := etcd.Open(ctx, "etcd://root:rootpw@"+addr+"/vol", true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Name(); got != "etcd://root@"+addr+"/vol" {
		t.Errorf("Name() = %q", got)
	}
	if err := db.Update(ctx, func(tx kvstore.Txn) error { tx.Set([]byte("k"), []byte("v")); return nil }); err != nil {
		t.Fatal(err)
	}
}
