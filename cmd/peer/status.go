package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/superpeer/superpeer/overlay"
)

// defaultAPI is where `peer status` looks for a node's status server
// (`peer run --http`).
const defaultAPI = "127.0.0.1:8080"

// statusWeb is the HTTP server of `peer run --http`: the node's
// overlay.StatusServer on a listener opened before the node starts, so
// that an address that cannot be listened on fails at once. A nil
// *statusWeb is no server; its methods do nothing.
type statusWeb struct {
	ln     net.Listener
	status *overlay.StatusServer
	srv    *http.Server
	done   chan struct{}
}

// listenStatus opens the listener of --http addr.
func listenStatus(addr string) (*statusWeb, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: cannot listen: %w", addr, err)
	}
	return &statusWeb{ln: ln}, nil
}

// serve starts serving n's status on the listener.
func (w *statusWeb) serve(n *overlay.Node, log *slog.Logger) error {
	if w == nil {
		return nil
	}
	st, err := overlay.NewStatusServer(n)
	if err != nil {
		_ = w.ln.Close()
		return err
	}
	w.status = st
	w.srv = &http.Server{
		Handler: st, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		if err := w.srv.Serve(w.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("status server stopped", "err", err)
		}
	}()
	log.Info("status server listening", "addr", "http://"+w.ln.Addr().String()+"/")
	return nil
}

// stop shuts the server down (letting requests in flight finish, for a
// few seconds at most), or closes the listener when it never served.
func (w *statusWeb) stop() error {
	if w == nil {
		return nil
	}
	if w.srv == nil {
		return w.ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	<-w.done
	return errors.Join(err, w.status.Close())
}

func newStatusCmd() *cobra.Command {
	var (
		api     string
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the status of a running node (peer run --http)",
		Long: `Fetch a running node's status from its HTTP server (peer run --http ADDR)
and print its ID, role, cluster, superpeer, members and election; with
--json, print the server's JSON as it is.`,
		Example: `  peer run --http 127.0.0.1:8080 &
  peer status
  peer status --api 127.0.0.1:8080 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v: want a positive duration", timeout)
			}
			addr := api
			if !strings.Contains(addr, "://") {
				addr = "http://" + addr
			}
			body, err := fetchStatus(cmd.Context(), strings.TrimSuffix(addr, "/")+"/status", timeout)
			if err != nil {
				return fmt.Errorf("--api %s: %w", api, err)
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st overlay.Status
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("--api %s: not a node's status: %v", api, oneLine(err))
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&api, "api", defaultAPI, "the node's status server: host:port or URL, as given to peer run --http")
	fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the node")
	return cmd
}

// fetchStatus GETs addr and returns the body of a 200 answer.
func fetchStatus(ctx context.Context, addr string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("bad address: %v", oneLine(err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("node unreachable (is it running with --http?): %v", oneLine(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the status: %v", oneLine(err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", addr, resp.Status)
	}
	return body, nil
}

// printStatus writes st as a few aligned lines.
func printStatus(w io.Writer, st overlay.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, f string, args ...any) { fmt.Fprintf(tw, k+"\t"+f+"\n", args...) }
	line("ID", "%s", st.ID)
	line("network", "%s (strategy %s)", st.Network, st.Strategy)
	if st.Private {
		line("role", "%s (private: behind a NAT, never a superpeer)", st.Role)
	} else {
		line("role", "%s", st.Role)
	}
	cluster := st.Cluster.Prefix
	if cluster == "" && st.Strategy == overlay.StrategyDHT {
		cluster = "(whole key space)"
	}
	line("cluster", "%s k=%d S=%d", cluster, st.Cluster.K, st.Cluster.TargetSuperpeers)
	sp := orNone(st.Superpeer.ID)
	if st.RTTToSuperpeer != nil {
		sp += fmt.Sprintf(" (RTT %.1f ms, %s)", st.RTTToSuperpeer.MS, st.RTTToSuperpeer.Source)
	}
	line("superpeer", "%s", sp)
	line("members", "%d: %s", len(st.Members), strings.Join(st.Members, " "))
	line("network size", "%d (%s)", st.SizeEstimate.N, st.SizeEstimate.Source)
	if st.Token != nil {
		line("token", "%d", *st.Token)
	}
	if e := st.Election; e != nil {
		line("election", "%s, leader %s, role %s, detection timeout %.0f ms", e.Algorithm, orNone(e.Leader), e.Role, e.TimeoutMS)
		line("term", "%d", e.Term)
		last := "none seen"
		if e.Last != nil {
			last = fmt.Sprintf("%s, term %d, leader %s (%d elections, %d losses seen)",
				e.Last.Time.UTC().Format(time.RFC3339), e.Last.Term, e.Last.Leader, e.Elections, e.Losses)
		}
		line("last election", "%s", last)
	} else {
		line("election", "none")
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// oneLine keeps an error message on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
