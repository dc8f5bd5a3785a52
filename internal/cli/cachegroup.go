package cli

import (
	"fmt"
	"net"
	"regexp"

	"github.com/spf13/pflag"
)

// addCacheGroupFlags adds the flags that make a mount a member of a
// cache group (docs/cachegroup.md).
func (o *mountOptions) addCacheGroupFlags(fl *pflag.FlagSet) {
	g := &o.cacheGroup
	fl.StringVar(&g.Name, "cache-group", "", "pool the block cache with the mounts of this volume that name the same group: each block is read from object storage by one member, its owner, and served to the others (docs/cachegroup.md)")
	fl.StringVar(&g.Listen, "cache-group-listen", "", "HOST:PORT this member serves its peers on (default: a free port on this host's first non-loopback IPv4 address)")
	fl.IntVar(&g.Weight, "cache-group-weight", 1, "this member's share of the group's blocks, relative to the others' (e.g. its cache size in GiB)")
	fl.BoolVar(&g.NoSharing, "no-sharing", false, "read from the cache group without holding a share of its blocks (a host with a small disk)")
	fl.BoolVar(&g.Seal, "cache-group-seal", false, "encrypt and authenticate the blocks peers send each other (always on for an encrypted volume); every member must agree")
	fl.BoolVar(&g.TLS, "cache-group-tls", false, "talk to peers over TLS 1.3, with a certificate every member derives from the volume's credentials (none to hand out); every member must agree")
}

// cacheGroupName is what a cache group may be called.
var cacheGroupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validateCacheGroup checks the cache group flags.
func (o *mountOptions) validateCacheGroup() error {
	g := &o.cacheGroup
	if g.Name == "" {
		if g.Listen != "" || g.NoSharing || g.Seal || g.TLS {
			return fmt.Errorf("--cache-group-listen, --no-sharing, --cache-group-seal and --cache-group-tls need --cache-group NAME")
		}
		return nil
	}
	if !cacheGroupName.MatchString(g.Name) {
		return fmt.Errorf("--cache-group %q: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", g.Name)
	}
	if g.Weight < 1 {
		return fmt.Errorf("--cache-group-weight %d: must be 1 or more (--no-sharing holds no share)", g.Weight)
	}
	if g.Listen != "" {
		if _, port, err := net.SplitHostPort(g.Listen); err != nil || port == "" {
			return fmt.Errorf("--cache-group-listen %q: want HOST:PORT (HOST may be empty for every address; PORT 0 picks a free one)", g.Listen)
		}
	}
	return nil
}
