package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/embedgw"
	"github.com/versity/versitygw/s3api"

	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// Config is how the gateway serves.
type Config struct {
	Addr              string // HOST:PORT to listen at
	AccessKey, Secret string // the one account's credentials (versitygw's root account)
	Region            string // the region reported to clients; us-east-1 when empty
	CertFile, KeyFile string // serve HTTPS with these, when set
	ReadOnly          bool   // refuse every change
	Debug             bool   // log every request
	// Listening, when not nil, is called once the gateway listens.
	Listening func()
}

// Serve serves fsys over S3 at cfg.Addr until ctx ends. Only one gateway
// serves in a process at a time: versitygw keeps some of its settings in
// globals.
func Serve(ctx context.Context, fsys *pathfs.FS, cfg Config) error {
	if cfg.AccessKey == "" || cfg.Secret == "" {
		return errors.New("the gateway needs an access key and a secret")
	}
	var opts []s3api.Option
	if cfg.Listening != nil {
		opts = append(opts, s3api.WithOnListen(cfg.Listening))
	}
	root := auth.Account{Access: cfg.AccessKey, Secret: cfg.Secret, Role: auth.RoleAdmin}
	err := embedgw.RunVersityGW(ctx, New(fsys), &embedgw.Config{
		IAMService:        oneAccount{auth.NewIAMServiceSingle(root)},
		RootUserAccess:    cfg.AccessKey,
		RootUserSecret:    cfg.Secret,
		Region:            cfg.Region,
		Ports:             []string{cfg.Addr},
		MaxConnections:    250000,
		MaxRequests:       100000,
		MultipartMaxParts: 10000,
		CertFile:          cfg.CertFile,
		KeyFile:           cfg.KeyFile,
		Quiet:             !cfg.Debug,
		Readonly:          cfg.ReadOnly,
		// versitygw's kept-alive connections answered a HEAD after an
		// empty PUT with 400 Bad Request, before the request reached
		// the back end, 1-3 times in 30 runs of TestObjects under -race
		// and load; without them, none in 40.
		KeepAlive: false,
		S3Options: opts,
		Version:   "sluice",
	})
	if err != nil {
		return fmt.Errorf("s3 gateway at %s: %w", cfg.Addr, err)
	}
	return nil
}

// oneAccount is versitygw's IAM of the root account alone, but that an
// unknown access key is auth.ErrNoSuchUser, which clients get as S3's
// InvalidAccessKeyId (403) rather than an admin API's 404.
type oneAccount struct{ auth.IAMService }

// GetUserAccount returns the account of access.
func (o oneAccount) GetUserAccount(access string) (auth.Account, error) {
	a, err := o.IAMService.GetUserAccount(access)
	if err != nil {
		return auth.Account{}, auth.ErrNoSuchUser
	}
	return a, nil
}
