package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/gateway"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// The gateway's access key and secret come from the environment, under
// the names MinIO and JuiceFS's gateway use.
const (
	gatewayUserEnv     = "MINIO_ROOT_USER"
	gatewayPasswordEnv = "MINIO_ROOT_PASSWORD"
)

type gatewayOptions struct {
	mountOptions
	certFile, keyFile string
	umask             uint16
	region            string
}

func newGateway() *cobra.Command {
	o := gatewayOptions{mountOptions: defaultMountOptions(), umask: 0o022, region: "us-east-1"}
	o.backupMeta = 0 // a mount of the volume backs it up
	cmd := &cobra.Command{
		Use:   "gateway META-URL ADDRESS",
		Short: "Serve a volume over the S3 protocol",
		Long: `Serve the volume whose metadata lives in META-URL as an S3 endpoint at
ADDRESS (HOST:PORT), with the client a mount runs (caches, readahead,
writeback), without FUSE. Buckets are the directories at the root of the
volume (or of --subdir), objects the files under them: a key with slashes
is a path. What a client uploads appears whole to mounts once the request
ends (written under a hidden name, .s3gateway, then renamed); what mounts
write, S3 clients see when they read after the mount's close
(close-to-open, docs/consistency.md). See docs/gateway.md.

Clients sign requests with the access key and secret in the environment
variables MINIO_ROOT_USER and MINIO_ROOT_PASSWORD (as JuiceFS's gateway
and MinIO take them), which the command requires. --cert-file and
--key-file serve HTTPS. Requests run as the user and group of this
process, with permissions checked as for a program on a mount; --umask
masks the modes of what clients create.`,
		Example: `  MINIO_ROOT_USER=admin MINIO_ROOT_PASSWORD=12345678 sluice gateway sqlite3://vol.db 0.0.0.0:9000
  AWS_ACCESS_KEY_ID=admin AWS_SECRET_ACCESS_KEY=12345678 aws --endpoint-url http://host:9000 s3 cp notes.txt s3://docs/`,
		Args: exactArgs(2, "META-URL and ADDRESS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.flags = flagValues(cmd)
			o.metaURL = redactURL(args[0])
			return runGateway(cmd.Context(), args[0], args[1], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.certFile, "cert-file", "", "certificate (PEM) to serve HTTPS with, with --key-file")
	fl.StringVar(&o.keyFile, "key-file", "", "private key (PEM) of --cert-file")
	fl.StringVar(&o.subdir, "subdir", "", "serve only this directory of the volume (a path from its root) as the root: its directories are the buckets")
	fl.Var(octalValue{&o.umask}, "umask", "umask of the files and directories clients create (octal)")
	fl.StringVar(&o.region, "region", o.region, "region the gateway answers as; clients sign requests for it")
	addServeFlags(fl, &o.mountOptions)
	return cmd
}

func runGateway(ctx context.Context, metaURL, addr string, o *gatewayOptions) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--cert-file and --key-file go together")
	}
	user, password := os.Getenv(gatewayUserEnv), os.Getenv(gatewayPasswordEnv)
	if user == "" || password == "" {
		return fmt.Errorf("set %s and %s to the access key and secret S3 clients are to sign requests with", gatewayUserEnv, gatewayPasswordEnv)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("ADDRESS %q: want HOST:PORT: %w", addr, err)
	}
	log := logger(o.debug)
	if ctx == nil {
		ctx = context.Background()
	}
	vol, err := openServed(ctx, metaURL, "s3://"+addr, &o.mountOptions, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := vol.Close(context.Background()); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	scheme := "http"
	if o.certFile != "" {
		scheme = "https"
	}
	cred := meta.Cred{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}
	err = gateway.Serve(ctx, pathfs.New(vol.VFS(), cred, o.umask), gateway.Config{
		Addr: addr, AccessKey: user, Secret: password, Region: o.region,
		CertFile: o.certFile, KeyFile: o.keyFile, ReadOnly: o.readOnly, Debug: o.debug,
		Listening: func() {
			fmt.Printf("Volume %s served over S3 at %s://%s/; press Ctrl-C to stop.\n", vol.Format().Name, scheme, addr)
		},
	})
	if ctx.Err() != nil {
		log.Info("stopping")
	}
	return err
}
