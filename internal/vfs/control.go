package vfs

import (
	"context"
	"strings"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
)

// ControlPrefix starts the names of the extended attributes through which
// root asks a running mount for work, e.g. `setfattr -n
// trusted.sluice.flush -v 1 MOUNTPOINT` (what `sluice umount --flush`
// does). The kernel lets only CAP_SYS_ADMIN set trusted.* attributes; such
// names are acted on, never stored.
const ControlPrefix = "trusted.sluice."

// Control is an action a mount runs when root sets the extended attribute
// ControlPrefix+name on inode ino; value is what was set.
type Control func(ctx context.Context, ino meta.Ino, value []byte) error

// control runs the control named by an extended attribute name. It
// reports false when name is not a control name.
func (v *VFS) control(ctx context.Context, ino meta.Ino, name string, value []byte) (bool, error) {
	action, ok := strings.CutPrefix(name, ControlPrefix)
	if !ok {
		return false, nil
	}
	if !meta.CredOf(ctx).IsRoot() {
		return true, syscall.EPERM
	}
	fn := v.conf.Controls[action]
	if fn == nil {
		return true, syscall.EINVAL
	}
	return true, fn(ctx, ino, value)
}
