// Command peer runs a superpeer overlay node, or a local testnet of them.
//
//	peer run --listen /ip4/0.0.0.0/tcp/4001 --bootstrap /ip4/…/p2p/12D3… --superpeers 8
//	peer testnet -n 32 --superpeers 4 [--json]
//
// Every error is one line on stderr and a non-zero exit status.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(exitCode(err))
	}
}
