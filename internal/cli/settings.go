package cli

import (
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mountSettings is what the internal file .config of a mount shows: the
// mount's own facts and the value of every flag, set or defaulted.
type mountSettings struct {
	MetaURL    string
	MountPoint string
	Version    string
	PID        int
	Flags      map[string]string
}

// flagValues returns the value of every flag of cmd, with passwords in
// URLs hidden.
func flagValues(cmd *cobra.Command) map[string]string {
	out := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		out[f.Name] = redactURL(f.Value.String())
	})
	return out
}

// redactURL hides the password of a URL-shaped value (a metadata URL with
// credentials); other values are returned as they are.
func redactURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "removed")
	}
	return u.String()
}
