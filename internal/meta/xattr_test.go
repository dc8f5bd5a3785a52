package meta_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// TestUnsupportedXattrs checks that names in no namespace the volume
// keeps fail with EOPNOTSUPP before any transaction (so even for an
// inode that does not exist), and that the others still reach the
// engine.
func TestUnsupportedXattrs(t *testing.T) {
	for _, acl := range []bool{false, true} {
		ctx := context.Background()
		st := kvstore.New(mem.New(t.Name()))
		t.Cleanup(func() { st.Close() })
		if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "xattr", UUID: "u", Storage: "mem", Bucket: "b",
			BlockSize: 4096, EnableACL: acl}); err != nil {
			t.Fatal(err)
		}
		c, err := meta.NewSession(ctx, st, meta.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		const missing = meta.Ino(999999)
		for _, tc := range []struct {
			name string
			want syscall.Errno // for a missing inode
		}{
			{"system.posix_acl_access", map[bool]syscall.Errno{false: syscall.EOPNOTSUPP, true: syscall.ENOENT}[acl]},
			{"system.posix_acl_default", map[bool]syscall.Errno{false: syscall.EOPNOTSUPP, true: syscall.ENOENT}[acl]},
			{"system.other", syscall.EOPNOTSUPP},
			{"foo", syscall.EOPNOTSUPP},
			{"user.k", syscall.ENOENT},
			{"security.capability", syscall.ENOENT},
			{"", syscall.ENOENT},
		} {
			_, gerr := c.GetXattr(ctx, missing, tc.name)
			serr := c.SetXattr(ctx, missing, tc.name, []byte("v"), 0)
			rerr := c.RemoveXattr(ctx, missing, tc.name)
			for op, err := range map[string]error{"get": gerr, "set": serr, "remove": rerr} {
				if got := meta.Errno(err); got != tc.want {
					t.Errorf("acl=%v: %s %q of a missing inode: %v, want %v", acl, op, tc.name, got, tc.want)
				}
			}
		}
	}
}
