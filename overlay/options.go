package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// ErrConfig reports an invalid node configuration.
var ErrConfig = errors.New("overlay: invalid configuration")

// Config is a node's configuration. Build it with options; New applies the
// defaults, then the options, then validates.
type Config struct {
	// Network names the overlay. The DHT protocol prefix, the topic names and
	// the lookup protocol derive from it, so overlays of different names
	// never mix. Default "default".
	Network string
	// ListenAddrs are the addresses the host listens on. Default: TCP and
	// QUIC on all IPv4 interfaces, on random ports.
	ListenAddrs []ma.Multiaddr
	// Bootstrap peers are dialled at start and, while none is connected,
	// again every BootstrapRetry, except by an ordinary peer connected to
	// its superpeer (unless it has no other peer); a superpeer or a peer
	// without one that was disconnected from them again while it kept
	// other peers (trimmed by their connection manager) waits twice as
	// long each time, up to 5 minutes.
	Bootstrap []peer.AddrInfo
	// Identity is the host's key. Default: a fresh Ed25519 key.
	Identity crypto.PrivKey
	// Gater, when set, vets the host's connections (libp2p's connection
	// gater): for instance an allowlist of peers. The node's own gate,
	// which refuses the peers it banned (banGate), vets them first; the
	// Gater still sees every completed handshake (InterceptSecured).
	Gater connmgr.ConnectionGater
	// PSK, when set, makes the swarm private (libp2p's pnet): every
	// connection must prove this 32-byte pre-shared key, so peers without
	// it cannot connect at all. It needs transports that carry it: TCP or
	// WebSocket, not QUIC; the default listen addresses are then TCP only.
	PSK pnet.PSK
	// Allow, when not empty, is an allowlist: the host connects only to
	// these peers (and itself); connections from others are closed after
	// their handshake. Not with Gater.
	Allow []peer.ID
	// Public makes the node join the public libp2p network: it runs a
	// client of the public DHT through PublicBootstrap and finds the other
	// peers of its overlay there by rendezvous (advertising under
	// RendezvousNamespace(Network)), every BootstrapRetry while it has none
	// and every RendezvousInterval once it has; see public.go.
	Public bool
	// PublicBootstrap are the public DHT's bootstrap peers. Default (with
	// Public): the usual public libp2p bootstrap peers.
	PublicBootstrap []peer.AddrInfo
	// Reachability says whether other peers can dial this node, which
	// decides whether it may be a superpeer (only reachable peers may, as
	// Gnutella's ultrapeers must accept incoming connections):
	// ReachabilityAuto (the default) asks AutoNAT and counts the node
	// reachable unless AutoNAT finds it private; ReachabilityPublic and
	// ReachabilityPrivate set it. A private node runs the DHT as a client
	// (no lookup ends at it), ranks last in elections, holds no token, and
	// is reached through the circuit relay of its superpeer; see nat.go.
	// On a host the node does not build (Host, Attach) the setting still
	// decides the node's part, but AutoNAT runs only as the host was built
	// to.
	Reachability string
	// RendezvousInterval is the period of the rendezvous search once the
	// node has overlay peers. Default 1 min.
	RendezvousInterval time.Duration
	// PubSub, when set, is the GossipSub router the node's topics use (an
	// application's, shared with it: see Attach); the node neither builds
	// nor stops one then, and the router's own parameters apply (the node
	// builds its own with a gossip factor of 0; see gossipSubParams).
	PubSub *pubsub.PubSub
	// Host, when set, is used instead of building one (ListenAddrs,
	// Identity, Gater, PSK and Allow are then ignored); the node closes it
	// on Close.
	// Tests and the testnet use it to run nodes on an in-process network.
	Host host.Host
	// Target is how many superpeers the overlay should have. Default:
	// a fraction of 0.1 of the estimated network size.
	Target dhtselect.Target
	// AnnounceInterval is the period of membership announcements; entries
	// expire after three of them. Default 5 s.
	AnnounceInterval time.Duration
	// ReevaluateInterval is the period of the selector's re-evaluation
	// (network-size estimate, then the lookup of the cluster key). Default 5 s.
	ReevaluateInterval time.Duration
	// BootstrapRetry is the time between attempts to reach the bootstrap
	// peers while none is connected (see Bootstrap). Default 5 s.
	BootstrapRetry time.Duration
	// QueryTimeout bounds one lookup query to one peer. Default 5 s.
	QueryTimeout time.Duration
	// Epoch is the epoch of the defence against ID grinding (DHT
	// strategy; see overlay/node/epoch.go): each cluster's superpeer is the
	// eligible member closest to a target salted anew every epoch, which
	// costs a hand-over per cluster per epoch, and a peer is eligible two
	// to three epochs after it was first seen (node.MinAge). Default one
	// hour; zero turns the defence off.
	Epoch time.Duration
	// Strategy is how superpeers are chosen: StrategyDHT (ID-space
	// reservation, the default) or StrategyGeometric (repelling tokens in
	// network coordinates, which needs a fixed Target.Superpeers).
	Strategy string
	// Geometric tunes the geometric strategy (Tokens comes from
	// Target.Superpeers); zero fields take geometric.DefaultConfig's values,
	// except four that New sets for live coordinates, which keep moving:
	// Dwell 5 token intervals, Margin 5 ms, MinHold 10 token intervals (one
	// snapshot of the coordinates) and Cooling 4 passes; see geo.go and
	// overlay/node's geo.go.
	Geometric geometric.Config
	// GeoRelocate turns on the relocation of tokens between clusters
	// (node.GeoConfig.Relocate): closer to the offline optimum, but only
	// for swarms whose superpeers trust one another, since a liar
	// superpeer draws tokens to its fellow liars with it. Off by default.
	GeoRelocate bool
	// PingInterval is the period of RTT measurements that fit the
	// coordinate (geometric strategy). Default 1 s.
	PingInterval time.Duration
	// TokenInterval is the period of the token machine and of attachment
	// requests (geometric strategy). Default 1 s.
	TokenInterval time.Duration
	// Election names the election algorithm each cluster runs (one of
	// classic.Algorithms: bully, ring, ring-max, next-in-line, candidate,
	// invitation, echo, stable); see elect.go for how it hands over with
	// the lookup. Empty (the default) runs none: the lookup alone names the
	// superpeer; see overlay/node's geoattach.go for the geometric
	// strategy, where the winner takes over the lost superpeer's token.
	Election string
	// Quorum wraps the election with terms and majority
	// (classic.NewQuorum): at most one superpeer per cluster per term, and
	// none on the minority side of a partition. Needs Election.
	Quorum bool
	// DataDir is where the node keeps the state that must survive its
	// restarts: with Quorum, each cluster's term and vote (classic.HardState),
	// so that a node that restarts cannot vote twice in one term
	// (hardstate.json); with an election, its own recent outages, so that
	// after restarts it ranks itself as its peers rank it (outages.json; see
	// outages.go). The node creates it (mode 0700) when it is missing; see
	// hardstate.go. Empty (the default) keeps none, and a node with Quorum
	// then logs a warning at start.
	DataDir string
	// IgnoreFlaps turns host quality off. By default a node that lost all
	// its connections (or restarted) twice within a minute ranks itself
	// below every steady member until that has passed, and says so in its
	// announcements, so that a node that keeps going down and coming back
	// does not keep winning elections.
	IgnoreFlaps bool
	// ElectionTick is the period of the election machines' ticks; their
	// heartbeats and timeouts are counted in it. Default 100 ms.
	ElectionTick time.Duration
	// MaxPerAddr is how many overlay identities one address may show
	// (the remote IP of their connections: an IPv4 address, an IPv6
	// /64): an address that shows more counts for nothing (none of its
	// identities counts towards the size estimate, is a cluster member,
	// an elector or a superpeer, so a flood of sybils from one address
	// leaves k as it was), and an identity not seen on a connection does
	// not count either. See overlay/node's admit.go. DHT strategy only.
	// Nodes that share an address (processes on one machine, hosts behind
	// one NAT) need it raised, or their own addresses (on loopback,
	// 127.x.y.z: the testnet's processes each listen on their own).
	// Default node.DefaultMaxPerAddr (4).
	MaxPerAddr int
	// Logger receives the node's structured logs. Default slog.Default().
	Logger *slog.Logger
	// MemoryBudget is the memory, in bytes, that no peer, protocol or
	// flood may push the node past: the resource manager's limits (the
	// system's, each protocol's, each peer's) derive from it, not from
	// the machine's memory; see limits.go for the split. Default
	// DefaultMemoryBudget (256 MiB), at least MinMemoryBudget. It applies
	// in full to a host the node builds; on a host it does not (Host,
	// Attach) the host's own resource manager applies, and only the
	// node's own bounds (its frames, the DHT's messages, GossipSub's
	// subscriptions when the node runs the router) hold.
	MemoryBudget int64
}

// Option changes a Config.
type Option func(*Config) error

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Network: "default",
		ListenAddrs: []ma.Multiaddr{
			ma.StringCast("/ip4/0.0.0.0/tcp/0"),
			ma.StringCast("/ip4/0.0.0.0/udp/0/quic-v1"),
		},
		Target:             dhtselect.Target{Fraction: 0.1},
		AnnounceInterval:   5 * time.Second,
		ReevaluateInterval: 5 * time.Second,
		BootstrapRetry:     5 * time.Second,
		QueryTimeout:       5 * time.Second,
		Epoch:              time.Hour,
		Strategy:           StrategyDHT,
		PingInterval:       time.Second,
		TokenInterval:      time.Second,
		ElectionTick:       100 * time.Millisecond,
		RendezvousInterval: time.Minute,
		Reachability:       ReachabilityAuto,
		MemoryBudget:       DefaultMemoryBudget,
		MaxPerAddr:         node.DefaultMaxPerAddr,
	}
}

var networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate reports the first invalid field, by name.
func (c *Config) Validate() error {
	switch {
	case !networkName.MatchString(c.Network):
		return fmt.Errorf("%w: network name %q: use 1 to 64 letters, digits, '.', '_' or '-'", ErrConfig, c.Network)
	case c.Host == nil && len(c.ListenAddrs) == 0:
		return fmt.Errorf("%w: no listen address", ErrConfig)
	case len(c.PSK) != 0 && len(c.PSK) != 32:
		return fmt.Errorf("%w: pre-shared key of %d bytes, want 32", ErrConfig, len(c.PSK))
	case c.Public && c.RendezvousInterval <= 0:
		return fmt.Errorf("%w: rendezvous interval %v, want > 0", ErrConfig, c.RendezvousInterval)
	case c.Public && len(c.PSK) > 0:
		return fmt.Errorf("%w: a private swarm (pre-shared key) cannot join the public network", ErrConfig)
	case !slices.Contains(reachabilities, c.Reachability):
		return fmt.Errorf("%w: reachability %q: use %s", ErrConfig, c.Reachability, strings.Join(reachabilities, ", "))
	case len(c.Allow) > 0 && c.Gater != nil:
		return fmt.Errorf("%w: an allowlist and a connection gater: give one (the allowlist is a gater)", ErrConfig)
	case c.AnnounceInterval <= 0:
		return fmt.Errorf("%w: announce interval %v, want > 0", ErrConfig, c.AnnounceInterval)
	case c.ReevaluateInterval <= 0:
		return fmt.Errorf("%w: re-evaluate interval %v, want > 0", ErrConfig, c.ReevaluateInterval)
	case c.BootstrapRetry <= 0:
		return fmt.Errorf("%w: bootstrap retry %v, want > 0", ErrConfig, c.BootstrapRetry)
	case c.QueryTimeout <= 0:
		return fmt.Errorf("%w: query timeout %v, want > 0", ErrConfig, c.QueryTimeout)
	case c.MemoryBudget < MinMemoryBudget || c.MemoryBudget > MaxMemoryBudget:
		return fmt.Errorf("%w: memory budget of %d bytes (%d MiB): want %d MiB to %d GiB (a node takes about 40 MiB idle, and 64 MiB of the budget are kept for what the resource manager does not account)",
			ErrConfig, c.MemoryBudget, c.MemoryBudget>>20, MinMemoryBudget>>20, MaxMemoryBudget>>30)
	case c.Epoch < 0 || c.Epoch > 0 && c.Epoch < time.Second:
		return fmt.Errorf("%w: epoch %v, want 0 (no defence against ID grinding) or at least 1s", ErrConfig, c.Epoch)
	case c.MaxPerAddr < 1:
		return fmt.Errorf("%w: %d identities per address, want at least 1", ErrConfig, c.MaxPerAddr)
	}
	if err := c.Target.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case c.Election != "" && !slices.Contains(classic.Algorithms(), c.Election):
		return fmt.Errorf("%w: election %q: use one of %s", ErrConfig, c.Election, strings.Join(classic.Algorithms(), ", "))
	case c.Quorum && c.Election == "":
		return fmt.Errorf("%w: quorum needs an election algorithm", ErrConfig)
	case c.Quorum && c.Strategy == StrategyGeometric:
		return fmt.Errorf("%w: quorum runs with the %q strategy only: with %q a token holder is a superpeer by its placement, which no majority gates",
			ErrConfig, StrategyDHT, StrategyGeometric)
	case c.Election != "" && c.ElectionTick <= 0:
		return fmt.Errorf("%w: election tick %v, want > 0", ErrConfig, c.ElectionTick)
	}
	if c.DataDir != "" {
		st, err := os.Stat(c.DataDir)
		switch {
		case errors.Is(err, fs.ErrNotExist): // made when it is needed
		case err != nil:
			return fmt.Errorf("%w: data directory %s: %w", ErrConfig, c.DataDir, err)
		case !st.IsDir():
			return fmt.Errorf("%w: data directory %s is not a directory: give a directory, or a path where one may be made", ErrConfig, c.DataDir)
		}
	}
	switch c.Strategy {
	case StrategyDHT:
	case StrategyGeometric:
		if c.Geometric.Tokens != 0 && c.Geometric.Tokens != c.Target.Superpeers {
			return fmt.Errorf("%w: Geometric.Tokens = %d disagrees with Target.Superpeers = %d; set the number of tokens with the target",
				ErrConfig, c.Geometric.Tokens, c.Target.Superpeers)
		}
		if c.Target.Superpeers > gossip.MaxTokens {
			return fmt.Errorf("%w: %d superpeers: the geometric strategy carries at most %d tokens", ErrConfig, c.Target.Superpeers, gossip.MaxTokens)
		}
		if c.Target.Superpeers < 1 {
			return fmt.Errorf("%w: the geometric strategy needs a fixed number of superpeers (tokens), not a fraction of %v; set it with --superpeers",
				ErrConfig, c.Target.Fraction)
		}
		if c.PingInterval <= 0 || c.TokenInterval <= 0 {
			return fmt.Errorf("%w: ping interval %v and token interval %v, want both > 0", ErrConfig, c.PingInterval, c.TokenInterval)
		}
		g := c.Geometric
		g.Tokens = c.Target.Superpeers
		if err := g.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	default:
		return fmt.Errorf("%w: strategy %q: use %q or %q", ErrConfig, c.Strategy, StrategyDHT, StrategyGeometric)
	}
	if len(c.PSK) > 0 && c.Host == nil {
		for _, a := range c.ListenAddrs {
			if !privateTransport(a) {
				return fmt.Errorf("%w: listen address %s: a private network (pre-shared key) runs over TCP or WebSocket only; go-libp2p's QUIC, WebTransport and WebRTC cannot carry it", ErrConfig, a)
			}
		}
	}
	for _, p := range c.Allow {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: allowlist peer %q: %w", ErrConfig, p, err)
		}
	}
	for _, b := range c.Bootstrap {
		if _, err := peer.IDFromBytes([]byte(b.ID)); err != nil {
			return fmt.Errorf("%w: bootstrap peer %q: %w", ErrConfig, b.ID, err)
		}
	}
	return nil
}

// WithNetwork sets the overlay's network name.
func WithNetwork(name string) Option {
	return func(c *Config) error { c.Network = name; return nil }
}

// WithListenAddrs sets the listen addresses.
func WithListenAddrs(addrs ...ma.Multiaddr) Option {
	return func(c *Config) error { c.ListenAddrs = addrs; return nil }
}

// WithBootstrap adds bootstrap peers.
func WithBootstrap(peers ...peer.AddrInfo) Option {
	return func(c *Config) error { c.Bootstrap = append(c.Bootstrap, peers...); return nil }
}

// WithBootstrapAddrs adds bootstrap peers given as multiaddrs that end in
// /p2p/<peer ID>.
func WithBootstrapAddrs(addrs ...ma.Multiaddr) Option {
	return func(c *Config) error {
		infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
		if err != nil {
			return fmt.Errorf("%w: bootstrap address: %w (it must end in /p2p/<peer ID>)", ErrConfig, err)
		}
		c.Bootstrap = append(c.Bootstrap, infos...)
		return nil
	}
}

// WithIdentity sets the host's private key.
func WithIdentity(k crypto.PrivKey) Option {
	return func(c *Config) error { c.Identity = k; return nil }
}

// WithConnectionGater vets the host's connections with g.
func WithConnectionGater(g connmgr.ConnectionGater) Option {
	return func(c *Config) error { c.Gater = g; return nil }
}

// WithPSK makes the swarm private with the pre-shared key k (see
// Config.PSK; LoadPSK reads a swarm.key file).
func WithPSK(k pnet.PSK) Option {
	return func(c *Config) error { c.PSK = k; return nil }
}

// WithAllowlist lets the host connect only to the given peers (see
// Config.Allow).
func WithAllowlist(peers ...peer.ID) Option {
	return func(c *Config) error { c.Allow = append(c.Allow, peers...); return nil }
}

// WithPublic makes the node join the public libp2p network and find its
// overlay's peers there by rendezvous (see Config.Public), through the
// given public bootstrap peers, or the usual ones when none is given.
func WithPublic(bootstrap ...peer.AddrInfo) Option {
	return func(c *Config) error {
		c.Public, c.PublicBootstrap = true, append(c.PublicBootstrap, bootstrap...)
		return nil
	}
}

// WithReachability sets the node's reachability (see Config.Reachability):
// ReachabilityAuto, ReachabilityPublic or ReachabilityPrivate.
func WithReachability(r string) Option {
	return func(c *Config) error { c.Reachability = r; return nil }
}

// WithPubSub makes the node's topics use ps, the application's GossipSub
// router (see Config.PubSub and Attach).
func WithPubSub(ps *pubsub.PubSub) Option {
	return func(c *Config) error { c.PubSub = ps; return nil }
}

// WithHost runs the node on an existing host, which the node then owns
// and closes on Close (Attach leaves it open).
func WithHost(h host.Host) Option {
	return func(c *Config) error { c.Host = h; return nil }
}

// WithTarget sets the superpeer target.
func WithTarget(t dhtselect.Target) Option {
	return func(c *Config) error { c.Target = t; return nil }
}

// WithIntervals sets the announce and re-evaluate periods.
func WithIntervals(announce, reevaluate time.Duration) Option {
	return func(c *Config) error {
		c.AnnounceInterval, c.ReevaluateInterval = announce, reevaluate
		return nil
	}
}

// WithEpoch sets the epoch of the defence against ID grinding; zero turns
// it off.
func WithEpoch(d time.Duration) Option {
	return func(c *Config) error { c.Epoch = d; return nil }
}

// WithBootstrapRetry sets the time between attempts to reach bootstrap peers.
func WithBootstrapRetry(d time.Duration) Option {
	return func(c *Config) error { c.BootstrapRetry = d; return nil }
}

// WithStrategy sets the selection strategy (StrategyDHT or
// StrategyGeometric).
func WithStrategy(name string) Option {
	return func(c *Config) error { c.Strategy = name; return nil }
}

// WithGeoRelocate turns the relocation of tokens between clusters on or
// off (Config.GeoRelocate).
func WithGeoRelocate(on bool) Option {
	return func(c *Config) error { c.GeoRelocate = on; return nil }
}

// WithGeometric tunes the geometric strategy and sets its ping and token
// intervals (zero keeps the default).
func WithGeometric(g geometric.Config, ping, token time.Duration) Option {
	return func(c *Config) error {
		c.Geometric = g
		if ping != 0 {
			c.PingInterval = ping
		}
		if token != 0 {
			c.TokenInterval = token
		}
		return nil
	}
}

// WithElection makes every cluster run the named election algorithm (one
// of classic.Algorithms), with terms and majority when quorum is set.
func WithElection(name string, quorum bool) Option {
	return func(c *Config) error { c.Election, c.Quorum = name, quorum; return nil }
}

// WithDataDir keeps the node's state that must survive restarts (see
// Config.DataDir) in the directory dir, which must not be empty.
func WithDataDir(dir string) Option {
	return func(c *Config) error {
		if dir == "" {
			return fmt.Errorf("%w: an empty data directory: give a path, or leave the option out to keep no state", ErrConfig)
		}
		c.DataDir = dir
		return nil
	}
}

// WithIgnoreFlaps turns host quality (see Config.IgnoreFlaps) off.
func WithIgnoreFlaps(ignore bool) Option {
	return func(c *Config) error { c.IgnoreFlaps = ignore; return nil }
}

// WithMemoryBudget sets the node's memory budget in bytes (see
// Config.MemoryBudget).
func WithMemoryBudget(bytes int64) Option {
	return func(c *Config) error { c.MemoryBudget = bytes; return nil }
}

// WithMaxPerAddr sets how many identities one address may show (see
// Config.MaxPerAddr).
func WithMaxPerAddr(n int) Option {
	return func(c *Config) error { c.MaxPerAddr = n; return nil }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *Config) error { c.Logger = l; return nil }
}
