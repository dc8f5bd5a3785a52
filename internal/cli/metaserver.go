package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/metaserver"
)

type metaServerOptions struct {
	listen, dir, name, metrics, log string
	pprof                           string
	checkpoint                      int64
	compressIdle                    time.Duration
	debug                           bool
	rotation                        logRotation
}

func newMetaServer() *cobra.Command {
	o := metaServerOptions{listen: "127.0.0.1:9400", checkpoint: 256 << 20}
	cmd := &cobra.Command{
		Use:   "meta-server --dir DATA-DIR [--listen ADDR]",
		Short: "Serve a volume's metadata from memory, durably",
		Long: `Run the in-memory metadata server: one process holds one namespace in
memory and serves it to mounts and commands over TCP. Format and mount a
volume on it with a URL such as sluice://127.0.0.1:9400/myvol.

Every change is written to a log in DATA-DIR and synced before it is
acknowledged (many changes share one fsync). A checkpoint of the whole
state is written in the background whenever --checkpoint-size of log has
accumulated, and the log before it is removed. On start the server loads
the newest checkpoint and replays the log after it; a torn record at the
log's end (a crash in mid-write) is cut, and anything else that fails its
checksum is refused with an error naming the file.

Records live in pages of about fifty (a directory's entries, neighbouring
inodes); a page nobody read or wrote for --compress-idle is compressed when
the server has nothing else to do, and decompressed again when used.

SIGTERM or SIGINT stops the server cleanly with a final checkpoint.`,
		Example: `  sluice meta-server --dir /var/lib/sluice/meta --listen 10.0.0.5:9400
  sluice format sluice://10.0.0.5:9400/myvol myvol --bucket /data/sluice
  sluice mount -d sluice://10.0.0.5:9400/myvol /mnt/sluice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMetaServer(o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "directory of the server's log and checkpoints (created if missing; one server per directory)")
	fl.StringVar(&o.listen, "listen", o.listen, "address to serve clients on")
	fl.StringVar(&o.name, "name", "", "volume name clients must ask for in their URL (empty: any)")
	fl.StringVar(&o.metrics, "metrics", "", "serve the server's metrics for Prometheus at http://ADDR/metrics (e.g. 127.0.0.1:9401)")
	fl.StringVar(&o.pprof, "pprof", "", "serve Go's pprof profiles over HTTP at this address (e.g. 127.0.0.1:6061)")
	fl.StringVar(&o.log, "log", "", "log to this file, rotated (default: stderr)")
	fl.Var(sizeValue{&o.checkpoint, 1 << 20}, "checkpoint-size", "write a checkpoint after this much log (a plain number is MiB)")
	fl.DurationVar(&o.compressIdle, "compress-idle", 10*time.Second, "compress pages of records nobody used for this long (at least 1s; 0: never)")
	fl.BoolVar(&o.debug, "debug", false, "log debug messages")
	o.rotation.addFlags(fl)
	return cmd
}

func runMetaServer(o metaServerOptions) error {
	if o.dir == "" {
		return errors.New("--dir is required: the directory of the server's log and checkpoints")
	}
	if o.checkpoint < 1<<20 {
		return fmt.Errorf("--checkpoint-size %d: at least 1 MiB", o.checkpoint)
	}
	compressIdle := o.compressIdle
	switch {
	case compressIdle == 0:
		compressIdle = -1 // never
	case compressIdle < time.Second:
		return fmt.Errorf("--compress-idle %s: at least 1s, or 0 for never", o.compressIdle)
	}
	log := logger(o.debug)
	if o.log != "" {
		w := newRotatingLog(o.log, o.rotation, nil)
		defer w.Close()
		level := slog.LevelInfo
		if o.debug {
			level = slog.LevelDebug
		}
		log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	srv, err := metaserver.Open(metaserver.Options{Dir: o.dir, Name: o.name, CheckpointBytes: o.checkpoint, CompressIdle: compressIdle, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	if o.pprof != "" {
		if err := servePprof(o.pprof, log); err != nil {
			srv.Close()
			ln.Close()
			return err
		}
	}
	if o.metrics != "" {
		if err := serveMetrics(o.metrics, log, promhttp.HandlerFor(srv.Registry(), promhttp.HandlerOpts{})); err != nil {
			srv.Close()
			ln.Close()
			return err
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	st := srv.Stats()
	log.Info("metadata server ready", "listen", ln.Addr().String(), "dir", o.dir, "keys", st.Keys, "index", st.Index)
	select {
	case s := <-sig:
		log.Info("stopping", "signal", s.String())
	case err := <-served:
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("final checkpoint: %w", err)
	}
	log.Info("stopped with a final checkpoint", "index", srv.Stats().Index)
	return nil
}
