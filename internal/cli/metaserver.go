package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/metaserver"
)

type metaServerOptions struct {
	listen, dir, name, metrics, log string
	pprof                           string
	checkpoint                      int64
	compressIdle                    time.Duration
	debug                           bool
	rotation                        logRotation
	auth                            metaServerAuth

	// A member of a replicated group.
	id, raftListen, raftAdvertise, peers string
	heartbeat                            time.Duration
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

Given a secret (--secret-file, or SLUICE_META_SECRET), the server serves
only clients that prove they hold it, before their first request, and
proves it holds the secret too. --tls-cert and --tls-key
encrypt the connections; --tls-client-ca also requires client
certificates. On an address other than loopback the server refuses to
start without a secret (or client certificates) unless --insecure-no-auth
is given. Clients put the secret in their URL:
sluice://:SECRET@HOST:PORT/NAME or sluice://HOST:PORT/NAME?secret-file=PATH.

Replication: with --raft-listen, the server is one member of a group of
three or five that replicate the log with Raft. A change is acknowledged
once a majority of the members has it durably; when the leader fails, the
others elect a new one within seconds and clients (whose URL lists every
member: sluice://h1:9400,h2:9400,h3:9400/myvol) go on with it. Start each
first member with the same --peers list of ID=RAFT-ADDRESS; a data
directory a single server left becomes the group's first snapshot. The
members prove to each other that they hold the secret as clients do (their
Raft traffic is authenticated, not encrypted).

SIGTERM or SIGINT stops the server cleanly with a final checkpoint.`,
		Example: `  head -c 32 /dev/urandom | base64 > /etc/sluice/meta.secret; chmod 600 /etc/sluice/meta.secret
  sluice meta-server --dir /var/lib/sluice/meta --listen 10.0.0.5:9400 --secret-file /etc/sluice/meta.secret
  sluice format 'sluice://10.0.0.5:9400/myvol?secret-file=/etc/sluice/meta.secret' myvol --bucket /data/sluice
  sluice mount -d 'sluice://10.0.0.5:9400/myvol?secret-file=/etc/sluice/meta.secret' /mnt/sluice

  # a group of three, one per host (h1 shown; h2 and h3 alike)
  sluice meta-server --dir /var/lib/sluice/meta --listen h1:9400 --secret-file /etc/sluice/meta.secret \
      --id h1 --raft-listen h1:9401 --peers h1=h1:9401,h2=h2:9401,h3=h3:9401
  sluice mount -d 'sluice://h1:9400,h2:9400,h3:9400/myvol?secret-file=/etc/sluice/meta.secret' /mnt/sluice`,
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
	o.auth.addFlags(fl)
	fl.StringVar(&o.id, "id", "", "this member's id in a replicated group (default: the --raft-listen address); unique, kept across restarts")
	fl.StringVar(&o.raftListen, "raft-listen", "", "make the server a member of a replicated group: the address the members reach each other at")
	fl.StringVar(&o.raftAdvertise, "raft-advertise", "", "the address the other members reach this one at, when it differs from --raft-listen")
	fl.StringVar(&o.peers, "peers", "", "the first members of a new group, this one included: ID=HOST:PORT,... (their --raft-listen); empty: wait to be added")
	fl.DurationVar(&o.heartbeat, "raft-heartbeat", time.Second, "how long followers wait for the leader before they elect another")
	cmd.AddCommand(newMemberCommands()...)
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
	secret, tlsConf, err := o.auth.server(o.listen)
	if err != nil {
		return err
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
	o.auth.warn(log)
	opts := metaserver.Options{Dir: o.dir, Name: o.name, CheckpointBytes: o.checkpoint, CompressIdle: compressIdle, Logger: log,
		Secret: secret, TLS: tlsConf}
	if o.raftListen != "" {
		ro, err := o.raftOptions(secret)
		if err != nil {
			ln.Close()
			return err
		}
		opts.Raft = ro
	} else if o.peers != "" || o.id != "" {
		ln.Close()
		return errors.New("--peers and --id make a member of a replicated group: give --raft-listen too")
	}
	srv, err := metaserver.Open(opts)
	if err != nil {
		ln.Close()
		if opts.Raft != nil {
			opts.Raft.Listener.Close()
		}
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

// ---- Credentials and TLS of the clients' port ----

// metaServerAuth is what a client must hold to be served: the secret it
// proves in wire's handshake, and with TLS the server's certificate (and
// a client certificate when --tls-client-ca is given).
type metaServerAuth struct {
	secretFile      string
	tlsCert, tlsKey string
	tlsClientCA     string
	insecureNoAuth  bool
	secretFileLoose bool // the secret file is readable by others than its owner
	noAuthOnPurpose bool // serving beyond loopback without credentials
}

// metaSecretEnv holds the secret itself, for when a file will not do.
const metaSecretEnv = "SLUICE_META_SECRET"

func (a *metaServerAuth) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&a.secretFile, "secret-file", "", "file holding the volume's secret (trailing newline ignored); clients must prove they hold it, and the server proves it too (default: the "+metaSecretEnv+" environment variable; make one with: head -c 32 /dev/urandom | base64 > FILE)")
	fl.StringVar(&a.tlsCert, "tls-cert", "", "PEM certificate (chain) of the server: encrypt every connection with TLS (with --tls-key; clients add ?tls=true&ca=CA.pem)")
	fl.StringVar(&a.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&a.tlsClientCA, "tls-client-ca", "", "PEM CA bundle: require every client to present a certificate it signed (mutual TLS; clients add &cert=PEM&key=PEM)")
	fl.BoolVar(&a.insecureNoAuth, "insecure-no-auth", false, "serve an address other than loopback without a secret or client certificates: anyone who reaches the port reads and changes the volume, object-store keys included")
}

// server returns the secret and TLS configuration the flags ask for,
// refusing to serve beyond loopback without credentials unless
// --insecure-no-auth says so.
func (a *metaServerAuth) server(listen string) ([]byte, *tls.Config, error) {
	var secret []byte
	switch env := os.Getenv(metaSecretEnv); {
	case a.secretFile != "" && env != "":
		return nil, nil, fmt.Errorf("both --secret-file and %s are set: give one", metaSecretEnv)
	case a.secretFile != "":
		var err error
		if secret, err = sluice.ReadSecretFile(a.secretFile); err != nil {
			return nil, nil, fmt.Errorf("--secret-file: %w", err)
		}
		if fi, err := os.Stat(a.secretFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			a.secretFileLoose = true
		}
	case env != "":
		secret = []byte(env)
	}
	conf, err := a.serverTLS()
	if err != nil {
		return nil, nil, err
	}
	if len(secret) == 0 && a.tlsClientCA == "" && !isLoopback(listen) {
		if !a.insecureNoAuth {
			return nil, nil, fmt.Errorf("--listen %s is reachable from other hosts, and no secret is set: anyone reaching it could read and change the volume, its object-store keys included. "+
				"Give a secret with --secret-file FILE (make one with: head -c 32 /dev/urandom | base64 > FILE; clients add ?secret-file=FILE to their URL) or %s, "+
				"or require client certificates with --tls-client-ca; or listen on 127.0.0.1; or, on a network you trust entirely, pass --insecure-no-auth", listen, metaSecretEnv)
		}
		a.noAuthOnPurpose = true
	}
	return secret, conf, nil
}

// warn logs what the operator should know about the credentials.
func (a *metaServerAuth) warn(log *slog.Logger) {
	if a.noAuthOnPurpose {
		log.Warn("serving without authentication (--insecure-no-auth): anyone who reaches the port reads and changes the volume, object-store keys included")
	}
	if a.secretFileLoose {
		log.Warn("the secret file is readable by other users; chmod 600 it", "file", a.secretFile)
	}
}

func (a *metaServerAuth) serverTLS() (*tls.Config, error) {
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: the server's certificate and its private key")
	}
	if a.tlsCert == "" {
		if a.tlsClientCA != "" {
			return nil, errors.New("--tls-client-ca needs TLS: give --tls-cert and --tls-key too")
		}
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if a.tlsClientCA != "" {
		pem, err := os.ReadFile(a.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		conf.ClientCAs = x509.NewCertPool()
		if !conf.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", a.tlsClientCA)
		}
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// isLoopback reports whether a listen address is reachable only from
// this host: a loopback IP or localhost. An empty host (every
// interface) and other names are not.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// raftOptions returns the options of a member of a replicated group.
func (o metaServerOptions) raftOptions(secret []byte) (*metaserver.RaftOptions, error) {
	if len(secret) == 0 && !isLoopback(o.raftListen) && !o.auth.insecureNoAuth {
		return nil, fmt.Errorf("--raft-listen %s is reachable from other hosts, and no secret is set: anyone reaching it could take part in the group. "+
			"Give the members a secret with --secret-file FILE or %s; or, on a network you trust entirely, pass --insecure-no-auth", o.raftListen, metaSecretEnv)
	}
	peers, err := metaserver.ParsePeers(o.peers)
	if err != nil {
		return nil, fmt.Errorf("--peers: %w", err)
	}
	id := o.id
	if id == "" {
		id = o.raftListen
	}
	if len(peers) > 0 && !slices.ContainsFunc(peers, func(p metaserver.Peer) bool { return p.ID == id }) {
		return nil, fmt.Errorf("--peers lists no member with this member's --id %q", id)
	}
	adv := o.raftAdvertise
	if i := slices.IndexFunc(peers, func(p metaserver.Peer) bool { return p.ID == id }); adv == "" && i >= 0 {
		adv = peers[i].Addr
	}
	if o.heartbeat < 100*time.Millisecond {
		return nil, fmt.Errorf("--raft-heartbeat %s: at least 100ms", o.heartbeat)
	}
	rl, err := net.Listen("tcp", o.raftListen)
	if err != nil {
		return nil, fmt.Errorf("--raft-listen %s: %w", o.raftListen, err)
	}
	return &metaserver.RaftOptions{ID: id, Listener: rl, Advertise: adv, Peers: peers, Secret: secret,
		HeartbeatTimeout: o.heartbeat, ElectionTimeout: o.heartbeat}, nil
}
