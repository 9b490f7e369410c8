package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/superpeer/superpeer/overlay"
)

// overviewPeriod is how often `peer testnet --http` notes the clusters in
// the page's time line while nobody asks (a request notes them too).
const overviewPeriod = 250 * time.Millisecond

// overviewWeb is the HTTP server of `peer testnet --http`: the overlay's
// page (overlay/web) and the whole testnet's overview (testnet.Net.
// Overview) on a listener opened before the testnet starts, so that an
// address that cannot be listened on fails at once. A nil *overviewWeb is
// no server; its methods do nothing.
type overviewWeb struct {
	ln   net.Listener
	srv  *http.Server
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// listenOverview opens the listener of --http addr; none for "".
func listenOverview(addr string) (*overviewWeb, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: cannot listen: %w", addr, err)
	}
	return &overviewWeb{ln: ln}, nil
}

// url is the page's address.
func (w *overviewWeb) url() string { return "http://" + w.ln.Addr().String() + "/" }

// serve serves the page of overview on the listener, and calls overview
// every overviewPeriod, until close.
func (w *overviewWeb) serve(overview func() overlay.Overview) {
	if w == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	w.srv = &http.Server{Handler: overlay.OverviewHandler(overview), ReadHeaderTimeout: 10 * time.Second}
	w.wg.Go(func() { _ = w.srv.Serve(w.ln) })
	w.wg.Go(func() {
		tick := time.NewTicker(overviewPeriod)
		defer tick.Stop()
		for {
			overview()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// close stops the server (letting requests in flight finish, for a few
// seconds at most), or closes the listener when it never served.
func (w *overviewWeb) close() error {
	if w == nil {
		return nil
	}
	if w.srv == nil {
		return w.ln.Close()
	}
	w.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	w.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
