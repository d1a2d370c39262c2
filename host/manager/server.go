package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server runs an HTTP server in the manager's first group (metrics, health probes).
type Server struct {
	// Name appears in errors and logs.
	Name string
	// Server is the server to run; its Addr is ignored when Listener is set.
	Server *http.Server
	// Listener, if set, is served instead of listening on Server.Addr.
	Listener net.Listener
	// ShutdownTimeout bounds the wait for open connections on stop. Defaults to 10 seconds.
	ShutdownTimeout time.Duration
}

var _ LeaderElectionRunnable = (*Server)(nil)

// NeedLeaderElection is false: servers run on every replica.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done, then shuts the server down.
func (s *Server) Start(ctx context.Context) error {
	ln := s.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Server.Addr); err != nil {
			return fmt.Errorf("server %q: listening on %s: %w", s.Name, s.Server.Addr, err)
		}
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.Server.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("server %q: %w", s.Name, err)
	case <-ctx.Done():
	}
	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := s.Server.Shutdown(sctx)
	if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("server %q: shutting down: %w", s.Name, err)
	}
	return nil
}
