package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/spf13/cobra"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet"
)

func newRunCmd() *cobra.Command {
	var (
		listen, bootstrap    []string
		network              string
		announce, reevaluate time.Duration
		strategy             string
		capacity, memory     int
		perAddr              int
		epoch                time.Duration
		identity, psk, cfg   string
		dataDir              string
		allow                []string
		control, public      bool
		publicBoot           []string
		httpAddr, reach      string
		tf                   targetFlags
		ef                   electionFlags
		lf                   logFlags
	)
	def := overlay.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one overlay node that joins the swarm of its bootstrap peers",
		Long: `Run one overlay node. It listens on the given addresses (TCP and QUIC by
default; TCP only in a private swarm, --psk), joins the swarm through its bootstrap peers (retrying while none
answers), and logs its role, cluster and superpeer as they change. Stop it
with Ctrl-C.`,
		Example: `  peer run --listen /ip4/127.0.0.1/tcp/4001 --superpeers 4
  peer run --listen /ip4/127.0.0.1/tcp/4002 --bootstrap /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg != "" {
				if err := applyConfig(cmd.Flags(), cfg); err != nil {
					return err
				}
			}
			log, err := lf.logger()
			if err != nil {
				return err
			}
			target, err := tf.target(cmd.Flags())
			if err != nil {
				return err
			}
			if capacity < 1 {
				return fmt.Errorf("--capacity %d: want at least 1 ordinary peer per superpeer", capacity)
			}
			if memory < overlay.MinMemoryBudget>>20 || memory > overlay.MaxMemoryBudget>>20 {
				return fmt.Errorf("--memory-budget %d: want %d to %d MiB", memory, overlay.MinMemoryBudget>>20, overlay.MaxMemoryBudget>>20)
			}
			listenAddrs, err := parseAddrs("--listen", listen)
			if err != nil {
				return err
			}
			bootAddrs, err := parseAddrs("--bootstrap", bootstrap)
			if err != nil {
				return err
			}
			opts := []overlay.Option{
				overlay.WithNetwork(network), overlay.WithTarget(target),
				overlay.WithIntervals(announce, reevaluate), overlay.WithLogger(log),
				overlay.WithBootstrapAddrs(bootAddrs...),
				overlay.WithStrategy(strategy), overlay.WithGeometric(geometric.Config{Capacity: capacity}, 0, 0),
				overlay.WithElection(ef.name, ef.quorum), overlay.WithIgnoreFlaps(ef.ignoreFlaps),
				overlay.WithReachability(reach), overlay.WithMemoryBudget(int64(memory) << 20),
				overlay.WithMaxPerAddr(perAddr), overlay.WithEpoch(epoch),
			}
			if len(listenAddrs) > 0 {
				opts = append(opts, overlay.WithListenAddrs(listenAddrs...))
			}
			if identity != "" {
				key, err := overlay.LoadIdentity(identity)
				if err != nil {
					return fmt.Errorf("--identity: %w", err)
				}
				opts = append(opts, overlay.WithIdentity(key))
			}
			if dataDir == "" && identity != "" {
				dataDir = defaultDataDir(identity)
			}
			if dataDir != "" {
				opts = append(opts, overlay.WithDataDir(dataDir))
			}
			if public {
				addrs, err := parseAddrs("--public-bootstrap", publicBoot)
				if err != nil {
					return err
				}
				infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
				if err != nil {
					return fmt.Errorf("--public-bootstrap: %w (each must end in /p2p/<peer ID>)", err)
				}
				opts = append(opts, overlay.WithPublic(infos...))
			} else if len(publicBoot) > 0 {
				return fmt.Errorf("--public-bootstrap needs --public")
			}
			if psk != "" {
				k, err := overlay.LoadPSK(psk)
				if err != nil {
					return fmt.Errorf("--psk: %w", err)
				}
				opts = append(opts, overlay.WithPSK(k))
			}
			for _, s := range allow {
				id, err := peer.Decode(s)
				if err != nil {
					return fmt.Errorf("--allow %q: not a peer ID: %w", s, err)
				}
				opts = append(opts, overlay.WithAllowlist(id))
			}
			var gate *testnet.Blocker
			if control {
				gate = testnet.NewBlocker()
				opts = append(opts, overlay.WithConnectionGater(gate))
			}
			var web *statusWeb
			if httpAddr != "" {
				if web, err = listenStatus(httpAddr); err != nil {
					return err
				}
			}
			// The process is this one node: the Go runtime's soft limit is
			// its budget, so the collector works harder as the heap nears
			// it (unless GOMEMLIMIT says otherwise).
			if os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(int64(memory) << 20)
			}
			ctx := cmd.Context()
			n, err := overlay.New(ctx, opts...)
			if err != nil {
				return errors.Join(err, web.stop())
			}
			log.Info("node started", "id", n.ID(), "addrs", fmt.Sprint(n.P2PAddrs()), "network", network, "target", target.String())
			if err := web.serve(n, log); err != nil {
				return errors.Join(err, n.Close())
			}
			if control {
				err = testnet.Control(ctx, n, gate, cmd.InOrStdin(), cmd.OutOrStdout())
			} else {
				<-ctx.Done()
			}
			log.Info("stopping")
			return errors.Join(err, web.stop(), n.Close())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&listen, "listen", nil, "listen multiaddrs, comma-separated (default TCP and QUIC on 0.0.0.0, random ports)")
	fs.StringSliceVar(&bootstrap, "bootstrap", nil, "bootstrap multiaddrs ending in /p2p/<peer ID>, comma-separated")
	fs.StringVar(&network, "network", def.Network, "overlay network name; overlays of different names never mix")
	fs.DurationVar(&announce, "announce", def.AnnounceInterval, "membership announcement period")
	fs.DurationVar(&reevaluate, "reevaluate", def.ReevaluateInterval, "role re-evaluation period")
	fs.StringVar(&strategy, "strategy", def.Strategy, "superpeer selection: dht (ID-space reservation) or geometric (tokens in network coordinates; needs --superpeers)")
	fs.IntVar(&capacity, "capacity", geometric.DefaultConfig().Capacity, "geometric strategy: most ordinary peers per superpeer")
	fs.StringVar(&identity, "identity", "", "private key file (libp2p encoding, mode 0600), so the peer ID survives restarts (default a fresh key)")
	fs.StringVar(&dataDir, "data-dir", "", "directory of the state that must survive restarts: with --quorum, each cluster's term and vote, so that a restarted node cannot vote twice in one term; with --election, its own recent outages, so that after restarts it ranks itself as its peers do (made, mode 0700, when missing). Default with --identity FILE: beside FILE, named as FILE with the extension .data (node1.key keeps node1.data); without --identity none, since the peer ID is new at every start")
	fs.StringVar(&psk, "psk", "", "pre-shared key file (swarm.key format, mode 0600; 'peer psk init' writes one): a private swarm that peers without the key cannot connect to; TCP only")
	fs.BoolVar(&public, "public", false, "join the public libp2p network and find this overlay's peers there by rendezvous (a namespace derived from --network)")
	fs.StringSliceVar(&publicBoot, "public-bootstrap", nil, "with --public: the public DHT's bootstrap multiaddrs, comma-separated (default the usual public libp2p bootstrap peers)")
	fs.StringVar(&reach, "reachability", def.Reachability, "whether other peers can dial this node, which only superpeers must: auto (AutoNAT decides; reachable until it finds otherwise), public, or private (behind a NAT: never a superpeer, reached through its superpeer's relay)")
	fs.IntVar(&memory, "memory-budget", overlay.DefaultMemoryBudget>>20, "memory budget in MiB that no peer, protocol or flood may push the node past: the resource manager's limits (connections, streams, message buffers, in all and per peer) derive from it, and it is the Go runtime's soft memory limit")
	fs.IntVar(&perAddr, "max-per-addr", def.MaxPerAddr, "most overlay identities one address (an IPv4 address, an IPv6 /64) may show before none of them counts as a member, for the size estimate, the elections or the lookups: a defence against sybils; raise it to run more nodes than that behind one address")
	fs.DurationVar(&epoch, "epoch", def.Epoch, "epoch of the defence against ID grinding: each cluster's superpeer is the eligible member closest to a target salted anew every epoch, and an ID is eligible only after 3 epochs; 0 turns it off")
	fs.StringSliceVar(&allow, "allow", nil, "peer IDs allowed to connect, comma-separated (default anyone)")
	fs.StringVar(&cfg, configFlag, "", "TOML file of options, named as these flags ('peer config init' writes one); flags given here override it")
	fs.StringVar(&httpAddr, "http", "", "serve the node's status on this address (host:port): /status (JSON), /metrics (Prometheus) and a live cluster map on / (default off)")
	fs.BoolVar(&control, "control", false, "be driven by a testnet: report state on stdout, take commands on stdin, stop when stdin ends")
	_ = fs.MarkHidden("control")
	tf.register(fs, def.Target.Fraction)
	ef.register(fs)
	lf.register(fs, "info")
	return cmd
}

// defaultDataDir is the data directory of the node whose key is in the
// file identity: beside it, named as it with its extension replaced by
// ".data" (node1.key: node1.data), or ".data" added when that would name
// the key file itself.
func defaultDataDir(identity string) string {
	name := filepath.Base(identity)
	dir := strings.TrimSuffix(name, filepath.Ext(name)) + ".data"
	if dir == name {
		dir = name + ".data"
	}
	return filepath.Join(filepath.Dir(identity), dir)
}

func parseAddrs(flag string, ss []string) ([]ma.Multiaddr, error) {
	out := make([]ma.Multiaddr, 0, len(ss))
	for _, s := range ss {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: not a multiaddr: %w", flag, s, err)
		}
		out = append(out, a)
	}
	return out, nil
}
