package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// HelperName is the name under which mount(8) runs this binary for file
// systems of type sluice: `mount -t sluice META-URL MOUNTPOINT` and
// /etc/fstab lines of type sluice run /sbin/mount.sluice, a link to it
// (and lines of type fuse.sluice, the type /proc/mounts shows, run
// /sbin/mount.fuse.sluice).
const HelperName = "mount.sluice"

// IsMountHelper reports whether the binary runs as mount(8)'s helper:
// its name (argv[0]) is mount.sluice or mount.fuse.sluice, and it is not
// the background mount that a helper started (which runs the binary
// again, under the name it has on disk: a copy named mount.sluice keeps
// that name).
func IsMountHelper(argv0 string) bool {
	name := filepath.Base(argv0)
	return (name == HelperName || name == "mount.fuse.sluice") && os.Getenv(readyFdEnv) == ""
}

// mountNoOps are the options of mount(8) and /etc/fstab that concern
// mount(8), systemd or the kernel's generic flags rather than the file
// system: the helper drops them. A FUSE mount is nosuid and nodev
// anyway.
var mountNoOps = map[string]bool{
	"defaults": true, "rw": true, "auto": true, "noauto": true, "nofail": true,
	"user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"_netdev": true, "netdev": true, "suid": true, "nosuid": true, "dev": true, "nodev": true,
	"exec": true, "noexec": true, "async": true, "atime": true, "nodiratime": true,
	"diratime": true, "loud": true, "silent": true,
}

// helperArgs turns mount(8)'s call of its helper,
//
//	mount.sluice META-URL MOUNTPOINT [-sfnvr] [-N NAMESPACE] [-o OPTIONS] [-t TYPE]
//
// into the arguments of `sluice mount`: always -d (mount(8) waits for
// the helper, which must return once the volume is mounted), then one
// flag for each option of -o that names a flag of `sluice mount`
// (cache-size=1024 is --cache-size=1024; a flag that takes no value is
// given bare: writeback), and ro, noatime, relatime and strictatime
// mapped to their flags. Options that are mount(8)'s or systemd's
// (_netdev, noauto, nofail, x-systemd.*, comment=…) are dropped. An
// option that is none of these is refused, unless -s (sloppy) asks to
// drop it with a warning. fake (-f) is mount(8)'s dry run, verbose
// (-v) asks for the command to be shown.
func helperArgs(args []string, flags *pflag.FlagSet, warn io.Writer) (out []string, fake, verbose bool, err error) {
	var pos, opts []string
	sloppy := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		switch a {
		case "-o", "-N", "-t":
			if i+1 >= len(args) {
				return nil, false, false, fmt.Errorf("%s: %s needs a value", HelperName, a)
			}
			if a == "-o" {
				opts = append(opts, strings.Split(args[i+1], ",")...)
			} // -N (a namespace) and -t (the type, sluice) need nothing
			i++
			continue
		}
		if strings.HasPrefix(a, "-o") {
			opts = append(opts, strings.Split(a[2:], ",")...)
			continue
		}
		for _, c := range a[1:] {
			switch c {
			case 's':
				sloppy = true
			case 'f':
				fake = true
			case 'v':
				verbose = true
			case 'n': // no /etc/mtab: nothing to write
			case 'r':
				opts = append(opts, "ro")
			case 'w':
				opts = append(opts, "rw")
			default:
				return nil, false, false, fmt.Errorf("%s: unknown option -%c (usage: %s META-URL MOUNTPOINT [-sfnvrw] [-o OPTIONS])", HelperName, c, HelperName)
			}
		}
	}
	if len(pos) != 2 {
		return nil, false, false, fmt.Errorf("%s: want META-URL MOUNTPOINT, got %d arguments (usage: %s META-URL MOUNTPOINT [-sfnvrw] [-o OPTIONS])", HelperName, len(pos), HelperName)
	}
	out = []string{"mount", "-d"}
	for _, o := range opts {
		if o == "" {
			continue
		}
		name, value, hasValue := strings.Cut(o, "=")
		switch {
		case mountNoOps[name] || strings.HasPrefix(name, "x-") || name == "comment":
			continue
		case name == "ro" && !hasValue:
			out = append(out, "--read-only")
			continue
		case (name == "noatime" || name == "relatime" || name == "strictatime") && !hasValue:
			out = append(out, "--atime-mode="+name)
			continue
		case name == "background" || name == "d":
			continue // always in the background
		}
		f := flags.Lookup(name)
		if f == nil || f.Hidden {
			if sloppy {
				fmt.Fprintf(warn, "%s: ignoring mount option %q, which is not a flag of sluice mount\n", HelperName, o)
				continue
			}
			return nil, false, false, fmt.Errorf("%s: mount option %q is not a flag of sluice mount (see sluice mount --help; -s ignores unknown options)", HelperName, o)
		}
		if hasValue {
			out = append(out, "--"+name+"="+value)
		} else if f.NoOptDefVal != "" {
			out = append(out, "--"+name)
		} else {
			return nil, false, false, fmt.Errorf("%s: mount option %q needs a value (%s=…)", HelperName, o, name)
		}
	}
	return append(out, pos[0], pos[1]), fake, verbose, nil
}

// MountHelper runs the binary as mount(8)'s helper (see helperArgs) with
// args, the arguments after the name: it mounts the volume in the
// background as `sluice mount -d` does, and returns once it is mounted.
func MountHelper(ctx context.Context, args []string) error {
	root := NewRoot()
	mount, _, err := root.Find([]string{"mount"})
	if err != nil {
		return err
	}
	out, fake, verbose, err := helperArgs(args, mount.Flags(), os.Stderr)
	if err != nil {
		return err
	}
	if verbose || fake {
		fmt.Fprintf(os.Stderr, "%s: sluice %s\n", HelperName, strings.Join(out, " "))
	}
	if fake {
		return nil
	}
	// The background mount runs this binary again with os.Args (see
	// daemonize): the child must see the arguments of sluice mount.
	os.Args = append([]string{os.Args[0]}, out...)
	root.SetArgs(out)
	return root.ExecuteContext(ctx)
}
