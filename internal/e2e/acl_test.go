package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/testserver"
)

// asUser runs a shell command as user, returning its combined output.
func asUser(t *testing.T, user, script string) (string, error) {
	t.Helper()
	out, err := exec.Command("runuser", "-u", user, "--", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

func requireTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			testserver.Missing(t, n+" is not installed", "apt-get install acl util-linux stress-ng")
		}
	}
}

// TestPOSIXACL sets ACLs with setfacl on a volume formatted with
// --enable-acl and checks that the kernel and Sluice enforce them for
// another user, and that default ACLs are inherited.
func TestPOSIXACL(t *testing.T) {
	requireTool(t, "setfacl", "getfacl", "runuser")
	v := newVolume(t, "--enable-acl")
	v.mount(t)
	p := v.path("secret")
	write(t, p, []byte("for nobody's eyes"))
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := asUser(t, "nobody", "cat "+p); err == nil {
		t.Fatal("nobody read a 0600 root file")
	}
	if out, err := exec.Command("setfacl", "-m", "u:nobody:r", p).CombinedOutput(); err != nil {
		t.Fatalf("setfacl: %v %s", err, out)
	}
	out, err := asUser(t, "nobody", "cat "+p)
	if err != nil || out != "for nobody's eyes" {
		t.Fatalf("nobody reads through the ACL: %q, %v", out, err)
	}
	if _, err := asUser(t, "nobody", "echo x >> "+p); err == nil {
		t.Error("nobody wrote with a read-only ACL entry")
	}
	facl, err := exec.Command("getfacl", "-c", p).CombinedOutput()
	if err != nil || !strings.Contains(string(facl), "user:nobody:r--") || !strings.Contains(string(facl), "mask::r--") {
		t.Errorf("getfacl:\n%s (%v)", facl, err)
	}
	if _, err := asUser(t, "daemon", "cat "+p); err == nil {
		t.Error("daemon (not in the ACL) read the file")
	}

	d := v.path("shared")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("setfacl", "-d", "-m", "u:nobody:rwx", d).CombinedOutput(); err != nil {
		t.Fatalf("setfacl -d: %v %s", err, out)
	}
	if out, err := exec.Command("setfacl", "-m", "u:nobody:rwx", d).CombinedOutput(); err != nil {
		t.Fatalf("setfacl: %v %s", err, out)
	}
	if out, err := asUser(t, "nobody", "umask 077; echo hi > "+d+"/made-by-nobody && mkdir "+d+"/sub"); err != nil {
		t.Fatalf("nobody creates in the shared directory: %v %s", err, out)
	}
	facl, _ = exec.Command("getfacl", "-c", d+"/sub").CombinedOutput()
	if !strings.Contains(string(facl), "default:user:nobody:rwx") {
		t.Errorf("subdirectory did not inherit the default ACL:\n%s", facl)
	}
	write(t, d+"/by-root", []byte("x"))
	if out, err := asUser(t, "nobody", "cat "+d+"/by-root"); err != nil {
		t.Errorf("nobody reads root's file through the inherited ACL: %v %s", err, out)
	}
}
