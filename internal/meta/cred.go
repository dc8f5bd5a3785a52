package meta

import "context"

// Cred is the identity of the process calling into the file system.
type Cred struct {
	Uid  uint32
	Gid  uint32
	Gids []uint32 // supplementary groups
	Pid  uint32
}

// IsRoot reports whether the caller is the superuser.
func (c Cred) IsRoot() bool { return c.Uid == 0 }

// InGroup reports whether gid is the caller's primary or a supplementary group.
func (c Cred) InGroup(gid uint32) bool {
	if c.Gid == gid {
		return true
	}
	for _, g := range c.Gids {
		if g == gid {
			return true
		}
	}
	return false
}

type credKey struct{}

// WithCred returns a context carrying the caller's credentials.
func WithCred(ctx context.Context, c Cred) context.Context {
	return context.WithValue(ctx, credKey{}, c)
}

// CredOf returns the credentials in ctx; without any, the caller is root,
// as for the file system's own background work.
func CredOf(ctx context.Context) Cred {
	if c, ok := ctx.Value(credKey{}).(Cred); ok {
		return c
	}
	return Cred{}
}
