package cli

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/net/webdav"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
	"github.com/sluicefs/sluice/internal/volume"
)

// WebDAV's credentials come from the environment, as JuiceFS's do.
const (
	webdavUserEnv     = "WEBDAV_USER"
	webdavPasswordEnv = "WEBDAV_PASSWORD"
)

type webdavOptions struct {
	mountOptions
	certFile, keyFile string
	umask             uint16
	insecure          bool
}

func newWebDAV() *cobra.Command {
	o := webdavOptions{mountOptions: defaultMountOptions(), umask: 0o022}
	o.backupMeta = 0 // a mount of the volume backs it up
	cmd := &cobra.Command{
		Use:   "webdav META-URL ADDRESS",
		Short: "Serve a volume over WebDAV",
		Long: `Serve the volume whose metadata lives in META-URL over WebDAV at ADDRESS
(HOST:PORT), with the client a mount runs (caches, readahead, writeback),
without FUSE: it works in a container with no /dev/fuse. What a WebDAV
client writes is committed when it finishes a request (a PUT, a MOVE), and
mounts see it then; what mounts write, WebDAV clients see when they read
after the mount's close (close-to-open, docs/consistency.md).

Clients authenticate with HTTP basic authentication when the environment
has WEBDAV_USER and WEBDAV_PASSWORD (as JuiceFS's webdav does); an ADDRESS
other than loopback without them is refused unless --insecure-no-auth is
given. --cert-file and --key-file serve HTTPS. Requests run as the user
and group of this process, with permissions checked as for a program on
a mount; --umask masks the modes of what clients create.`,
		Example: `  WEBDAV_USER=alice WEBDAV_PASSWORD=secret sluice webdav sqlite3://vol.db 0.0.0.0:8080 --cert-file c.pem --key-file k.pem
  curl -u alice:secret -T notes.txt https://host:8080/docs/notes.txt`,
		Args: exactArgs(2, "META-URL and ADDRESS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.flags = flagValues(cmd)
			o.metaURL = redactURL(args[0])
			return runWebDAV(cmd.Context(), args[0], args[1], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.certFile, "cert-file", "", "certificate (PEM) to serve HTTPS with, with --key-file")
	fl.StringVar(&o.keyFile, "key-file", "", "private key (PEM) of --cert-file")
	fl.StringVar(&o.subdir, "subdir", "", "serve only this directory of the volume (a path from its root) as the root: nothing outside it can be reached")
	fl.Var(octalValue{&o.umask}, "umask", "umask of the files and directories clients create (octal)")
	fl.BoolVar(&o.insecure, "insecure-no-auth", false, "serve an address other than loopback without WEBDAV_USER and WEBDAV_PASSWORD: anyone who reaches it reads and writes the volume")
	addServeFlags(fl, &o.mountOptions)
	return cmd
}

// addServeFlags adds the flags of the client's caches and the volume's
// access that the commands serving a volume without FUSE (webdav,
// gateway) share with mount.
func addServeFlags(fl *pflag.FlagSet, o *mountOptions) {
	fl.StringVar(&o.cacheDir, "cache-dir", o.cacheDir, "directories of the local block cache, separated by ':'; 'memory' keeps blocks in memory only")
	fl.Var(sizeValue{&o.cacheSize, 1 << 20}, "cache-size", "size of the local block cache, across its directories (a plain number is MiB)")
	fl.Var(sizeValue{&o.bufferSize, 1 << 20}, "buffer-size", "memory for write buffers and, as much again, for the in-memory block cache (a plain number is MiB)")
	fl.BoolVar(&o.writeback, "writeback", false, "acknowledge writes once their blocks are staged durably in the cache directory, and upload in the background")
	fl.IntVar(&o.maxUploads, "max-uploads", o.maxUploads, "number of blocks uploaded concurrently")
	fl.IntVar(&o.maxDownloads, "max-downloads", o.maxDownloads, "number of blocks downloaded concurrently")
	fl.Var(sizeValue{&o.maxReadahead, 1 << 20}, "max-readahead", "largest readahead window of one sequential reader (a plain number is MiB; 0 disables readahead)")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", "longest a metadata operation may wait for the metadata engine before it fails (seconds or a duration; 0: wait for ever)")
	fl.BoolVar(&o.readOnly, "read-only", false, "serve the volume read-only: every change fails")
	fl.StringVar(&o.metrics, "metrics", "", "serve metrics for Prometheus at http://ADDR/metrics")
	fl.BoolVar(&o.debug, "debug", false, "log every request")
	o.addCacheGroupFlags(fl)
}

// octalValue is a flag of a mode in octal.
type octalValue struct{ p *uint16 }

func (v octalValue) String() string { return fmt.Sprintf("%03o", *v.p) }
func (v octalValue) Type() string   { return "octal" }
func (v octalValue) Set(s string) error {
	var m uint16
	if _, err := fmt.Sscanf(s, "%o", &m); err != nil || m > 0o777 {
		return fmt.Errorf("want an octal mode such as 022")
	}
	*v.p = m
	return nil
}

func runWebDAV(ctx context.Context, metaURL, addr string, o *webdavOptions) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--cert-file and --key-file go together")
	}
	user, password := os.Getenv(webdavUserEnv), os.Getenv(webdavPasswordEnv)
	if (user == "") != (password == "") {
		return fmt.Errorf("set both %s and %s, or neither", webdavUserEnv, webdavPasswordEnv)
	}
	if user == "" && !o.insecure && !isLoopback(addr) {
		return fmt.Errorf("%s is not a loopback address, and %s and %s are not set: anyone who reaches it would read and write the volume. Set them, or pass --insecure-no-auth on a network you trust entirely", addr, webdavUserEnv, webdavPasswordEnv)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	log := logger(o.debug)
	if ctx == nil {
		ctx = context.Background()
	}
	vol, err := openServed(ctx, metaURL, "webdav://"+ln.Addr().String(), &o.mountOptions, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := vol.Close(context.Background()); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	cred := meta.Cred{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}
	h := &webdav.Handler{
		FileSystem: davFS{pathfs.New(vol.VFS(), cred, o.umask)},
		LockSystem: webdav.NewMemLS(),
		Logger: func(r *http.Request, err error) {
			if err != nil {
				log.Debug("webdav", "method", r.Method, "path", r.URL.Path, "err", err)
			} else if o.debug {
				log.Debug("webdav", "method", r.Method, "path", r.URL.Path)
			}
		},
	}
	srv := &http.Server{Handler: basicAuth(h, user, password), ReadHeaderTimeout: time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() {
		if o.certFile != "" {
			served <- srv.ServeTLS(ln, o.certFile, o.keyFile)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	scheme := "http"
	if o.certFile != "" {
		scheme = "https"
	}
	fmt.Printf("Volume %s served over WebDAV at %s://%s/; press Ctrl-C to stop.\n", vol.Format().Name, scheme, ln.Addr())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		log.Info("stopping", "signal", sig.String())
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// basicAuth requires user and password of every request, unless user is
// empty.
func basicAuth(h http.Handler, user, password string) http.Handler {
	if user == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// davFS is a pathfs.FS as webdav's FileSystem.
type davFS struct{ fs *pathfs.FS }

func (d davFS) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	return d.fs.Mkdir(ctx, name, perm)
}

func (d davFS) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (webdav.File, error) {
	f, err := d.fs.OpenFile(ctx, name, flag, perm)
	if err != nil {
		return nil, err
	}
	return davFile{f}, nil
}

// davFile is a pathfs.File whose WebDAV dead properties (PROPPATCH) are
// extended attributes of the file, user.dav.NAMESPACE NAME, holding the
// property's language, a zero byte and its XML: they live as long as the
// file, move with it and are copied by tools that copy xattrs.
type davFile struct{ *pathfs.File }

var _ webdav.DeadPropsHolder = davFile{}

// davXattrPrefix begins the names of the xattrs of dead properties.
const davXattrPrefix = "user.dav."

func davXattr(n xml.Name) string { return davXattrPrefix + n.Space + " " + n.Local }

func (f davFile) DeadProps() (map[xml.Name]webdav.Property, error) {
	names, err := f.Xattrs()
	if err != nil {
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENOSYS) {
			return nil, nil
		}
		return nil, err
	}
	out := map[xml.Name]webdav.Property{}
	for _, x := range names {
		key, ok := strings.CutPrefix(x, davXattrPrefix)
		if !ok {
			continue
		}
		space, local, ok := strings.Cut(key, " ")
		if !ok {
			continue
		}
		v, err := f.GetXattr(x)
		if err != nil {
			if errors.Is(err, syscall.ENODATA) {
				continue // removed meanwhile
			}
			return nil, err
		}
		lang, inner, _ := bytes.Cut(v, []byte{0})
		n := xml.Name{Space: space, Local: local}
		out[n] = webdav.Property{XMLName: n, Lang: string(lang), InnerXML: inner}
	}
	return out, nil
}

func (f davFile) Patch(patches []webdav.Proppatch) ([]webdav.Propstat, error) {
	st := webdav.Propstat{Status: http.StatusOK}
	for _, p := range patches {
		for _, prop := range p.Props {
			name := davXattr(prop.XMLName)
			var err error
			if p.Remove {
				err = f.RemoveXattr(name)
			} else {
				err = f.SetXattr(name, append(append([]byte(prop.Lang), 0), prop.InnerXML...))
			}
			if err != nil {
				return nil, err
			}
			st.Props = append(st.Props, webdav.Property{XMLName: prop.XMLName})
		}
	}
	return []webdav.Propstat{st}, nil
}

func (d davFS) RemoveAll(ctx context.Context, name string) error { return d.fs.RemoveAll(ctx, name) }

func (d davFS) Rename(ctx context.Context, oldName, newName string) error {
	return d.fs.Rename(ctx, oldName, newName)
}

func (d davFS) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	return d.fs.Stat(ctx, name)
}

// openServed opens the volume a command that serves it without FUSE
// (webdav, gateway) serves, with the client a mount named name would run,
// and serves its metrics when o asks.
func openServed(ctx context.Context, metaURL, name string, o *mountOptions, log *slog.Logger) (*volume.Volume, error) {
	opts := o.volumeOptions(name, log)
	opts.Subdir = o.subdir
	vol, err := volume.Open(ctx, metaURL, opts)
	if err != nil {
		return nil, err
	}
	if o.metrics != "" {
		if err := serveMetrics(o.metrics, log, vol.Telemetry().Handler()); err != nil {
			vol.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return vol, nil
}
