package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestHelperArgs(t *testing.T) {
	const url, mp = "redis://h:6379/1", "/mnt/vol"
	for _, c := range []struct {
		name          string
		args          []string
		want          []string // the flags between "mount -d" and the URL
		fake, verbose bool
		err, warn     string
	}{
		{name: "plain", args: []string{url, mp}},
		{name: "fstab defaults", args: []string{url, mp, "-o", "rw,defaults,_netdev,noauto,nofail,x-systemd.automount,comment=x"}},
		{name: "flags with values", args: []string{url, mp, "-o", "cache-size=1024,cache-dir=/var/cache/a:/var/cache/b,meta-timeout=30s"},
			want: []string{"--cache-size=1024", "--cache-dir=/var/cache/a:/var/cache/b", "--meta-timeout=30s"}},
		{name: "bare boolean flags", args: []string{url, mp, "-o", "writeback,readdir-cache"}, want: []string{"--writeback", "--readdir-cache"}},
		{name: "kernel names", args: []string{url, mp, "-o", "ro,noatime,nosuid,nodev"}, want: []string{"--read-only", "--atime-mode=noatime"}},
		{name: "-r and joined -o", args: []string{"-r", url, "-orelatime", mp}, want: []string{"--read-only", "--atime-mode=relatime"}},
		{name: "mount(8)'s own", args: []string{url, mp, "-n", "-N", "/proc/1/ns/mnt", "-t", "sluice", "-o", "rw,d,background"}},
		{name: "fake and verbose", args: []string{url, mp, "-fv"}, fake: true, verbose: true},
		{name: "unknown option", args: []string{url, mp, "-o", "cache-size=1,bogus=1"}, err: `mount option "bogus=1" is not a flag of sluice mount`},
		{name: "sloppy", args: []string{url, mp, "-s", "-o", "bogus,writeback"}, want: []string{"--writeback"}, warn: `ignoring mount option "bogus"`},
		{name: "value missing", args: []string{url, mp, "-o", "cache-size"}, err: `mount option "cache-size" needs a value`},
		{name: "hidden flag", args: []string{url, mp, "-o", "backup-meta-min=1s"}, err: `"backup-meta-min=1s" is not a flag`},
		{name: "no mount point", args: []string{url}, err: "want META-URL MOUNTPOINT, got 1 arguments"},
		{name: "-o without options", args: []string{url, mp, "-o"}, err: "-o needs a value"},
		{name: "unknown letter", args: []string{url, mp, "-x"}, err: "unknown option -x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := NewRoot()
			mount, _, err := root.Find([]string{"mount"})
			if err != nil {
				t.Fatal(err)
			}
			var warn bytes.Buffer
			out, fake, verbose, err := helperArgs(c.args, mount.Flags(), &warn)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]string{"mount", "-d"}, c.want...), url, mp)
			if !slices.Equal(out, want) {
				t.Errorf("sluice %q, want %q", out, want)
			}
			if fake != c.fake || verbose != c.verbose {
				t.Errorf("fake %v verbose %v, want %v %v", fake, verbose, c.fake, c.verbose)
			}
			if !strings.Contains(warn.String(), c.warn) || (c.warn == "" && warn.Len() > 0) {
				t.Errorf("warned %q, want %q", warn.String(), c.warn)
			}
		})
	}
}

func TestIsMountHelper(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/sbin/mount.sluice": true, "mount.fuse.sluice": true, "/usr/local/bin/sluice": false, "mount.sluice2": false,
	} {
		if got := IsMountHelper(argv0); got != want {
			t.Errorf("IsMountHelper(%q) = %v", argv0, got)
		}
	}
	t.Setenv(readyFdEnv, "3")
	if IsMountHelper("/sbin/mount.sluice") {
		t.Error("the background mount a helper started runs as a helper again")
	}
}
