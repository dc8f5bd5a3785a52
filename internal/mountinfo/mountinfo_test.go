package mountinfo

import (
	"strings"
	"testing"
)

const table = `22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
43 22 0:39 / /tmp/bvm rw,nosuid,nodev,relatime shared:5 - fuse.sluice sluice:bvol rw,user_id=0,group_id=0
44 22 0:40 / /tmp/bvm2 rw,relatime - fuse.sluice sluice:other rw
45 22 0:41 / /mnt/with\040space rw - fuse.sluice sluice:spaced rw
46 22 0:42 / /stack rw - fuse.sluice sluice:under rw
47 46 0:43 / /stack rw - tmpfs tmpfs rw
48 22 0:44 / /stack/inner rw - fuse.sshfs me@host: rw
bad line
`

func parse(t *testing.T) []Mount {
	t.Helper()
	ms, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("parsed %d mounts, want 7 (the bad line left out): %+v", len(ms), ms)
	}
	return ms
}

func TestContaining(t *testing.T) {
	ms := parse(t)
	tests := []struct {
		path string
		want Mount
	}{
		{"/tmp/bvm", Mount{"/tmp/bvm", "fuse.sluice", "sluice:bvol", "0:39"}},
		{"/tmp/bvm/a/b", Mount{"/tmp/bvm", "fuse.sluice", "sluice:bvol", "0:39"}},
		{"/tmp/bvm2", Mount{"/tmp/bvm2", "fuse.sluice", "sluice:other", "0:40"}},
		{"/tmp/bvmx", Mount{"/", "ext4", "/dev/vda", "253:0"}},
		{"/mnt/with space/x", Mount{"/mnt/with space", "fuse.sluice", "sluice:spaced", "0:41"}},
		{"/stack/x", Mount{"/stack", "tmpfs", "tmpfs", "0:43"}}, // mounted over the Sluice mount
		{"/stack/inner/y", Mount{"/stack/inner", "fuse.sshfs", "me@host:", "0:44"}},
		{"/", Mount{"/", "ext4", "/dev/vda", "253:0"}},
	}
	for _, tt := range tests {
		if m, ok := containing(ms, tt.path); !ok || m != tt.want {
			t.Errorf("mount of %s = %+v, %v; want %+v", tt.path, m, ok, tt.want)
		}
	}
	if m, ok := containing(ms[1:2], "/home"); ok {
		t.Errorf("mount of /home in a table without it = %+v", m)
	}
}

func TestAt(t *testing.T) {
	ms := parse(t)
	if m, ok := at(ms, "/stack"); !ok || m.FSType != "tmpfs" {
		t.Errorf("at /stack: %+v, %v; want the tmpfs mounted last", m, ok)
	}
	if m, ok := at(ms, "/tmp/bvm/a"); ok {
		t.Errorf("at a directory inside a mount: %+v", m)
	}
}

func TestSluiceVolume(t *testing.T) {
	tests := []struct {
		fsType, source, name string
		sluice               bool
	}{
		{"fuse.sluice", "sluice:vol", "vol", true},
		{"fuse", "sluice:vol", "vol", true}, // mounted without a subtype
		{"ext4", "/dev/vda", "", false},
		{"fuse.sshfs", "me@host:", "", false},
		{"tmpfs", "sluice:vol", "", false},
	}
	for _, tt := range tests {
		name, ok := Mount{Point: "/m", FSType: tt.fsType, Source: tt.source}.SluiceVolume()
		if name != tt.name || ok != tt.sluice {
			t.Errorf("SluiceVolume(%s %s) = %q, %v; want %q, %v", tt.fsType, tt.source, name, ok, tt.name, tt.sluice)
		}
	}
}
