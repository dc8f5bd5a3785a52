package cli

import (
	"net/url"
	"os"

	"github.com/spf13/pflag"
)

// Environment variables that supply object storage credentials when no
// flag does (format, objbench), and that override the stored ones (mount
// and the other commands that open a volume's bucket).
const (
	envAccessKey    = "ACCESS_KEY"
	envSecretKey    = "SECRET_KEY"
	envSessionToken = "SESSION_TOKEN"
)

// credentials are the keys of an object storage.
type credentials struct {
	accessKey    string
	secretKey    string
	sessionToken string
}

// addFlags binds --access-key, --secret-key and --session-token.
func (c *credentials) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&c.accessKey, "access-key", "", "access key of the object storage (default: env "+envAccessKey+")")
	fl.StringVar(&c.secretKey, "secret-key", "", "secret key of the object storage (default: env "+envSecretKey+")")
	fl.StringVar(&c.sessionToken, "session-token", "", "session token of temporary credentials (default: env "+envSessionToken+")")
}

// withEnv returns c with each empty key taken from the environment.
func (c credentials) withEnv() credentials {
	for _, k := range []struct {
		v   *string
		env string
	}{{&c.accessKey, envAccessKey}, {&c.secretKey, envSecretKey}, {&c.sessionToken, envSessionToken}} {
		if *k.v == "" {
			*k.v = os.Getenv(k.env)
		}
	}
	return c
}

// envOverride returns c with each key replaced by its environment variable
// when that is set.
func (c credentials) envOverride() credentials {
	for _, k := range []struct {
		v   *string
		env string
	}{{&c.accessKey, envAccessKey}, {&c.secretKey, envSecretKey}, {&c.sessionToken, envSessionToken}} {
		if v := os.Getenv(k.env); v != "" {
			*k.v = v
		}
	}
	return c
}

// moveURLCredentials takes the user and password out of a bucket URL
// (http://AK:SK@HOST/BUCKET), so that the stored bucket holds no secret.
// Keys already in c win over those in the URL.
func moveURLCredentials(bucket string, c credentials) (string, credentials) {
	u, err := url.Parse(bucket)
	if err != nil || u.User == nil {
		return bucket, c
	}
	if c.accessKey == "" && c.secretKey == "" {
		c.accessKey = u.User.Username()
		c.secretKey, _ = u.User.Password()
	}
	u.User = nil
	return u.String(), c
}
