package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// servePprof serves Go's runtime profiles at addr in the background, for
// `go tool pprof http://ADDR/debug/pprof/profile`.
func servePprof(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	return nil
}

// serveMetrics serves the metrics of a mount at addr/metrics in the
// Prometheus text format, in the background: each of the writers writes
// its families in turn (object storage, compaction and deletion).
func serveMetrics(addr string, log *slog.Logger, writers ...func(io.Writer) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, write := range writers {
			if err := write(w); err != nil {
				log.Warn("metrics: write", "err", err)
				return
			}
		}
	})
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	return nil
}
