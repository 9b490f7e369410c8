package testnet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/overlay"
)

// Member is what a Net shows of one live node: an in-process
// *overlay.Node, or the last report of a node process (Config.Exec).
type Member interface {
	ID() peer.ID
	State() overlay.State
	ElectionStats() overlay.ElectionStats
}

var _ Member = (*overlay.Node)(nil)

// fabric runs a Net's nodes and the network between them: in this process
// on mocknet (memFabric), or each node in its own OS process on loopback
// (procFabric). Nodes are named by their index, their place in start
// order; the Net keeps track of which are live and which links are cut.
type fabric interface {
	// start starts node i with key sk, reachable from every live node,
	// bootstrapped from node boot (-1 for none), and returns it once it
	// runs.
	start(ctx context.Context, i int, sk crypto.PrivKey, boot int) (Member, error)
	// kill stops node i: abruptly, as a crash (no goodbye to anyone), or
	// when graceful as a clean shutdown (its Close says goodbye; a node
	// process gets SIGTERM).
	kill(i int, graceful bool) error
	// cut cuts nodes i and j apart, their open connections included, until
	// mend.
	cut(i, j int) error
	mend(i, j int) error
	// failed lists the live nodes that stopped by themselves, and why.
	failed() []error
	close() error
}

// memFabric runs the nodes in this process on mocknet, with one link per
// pair of nodes delayed by the latency matrix.
type memFabric struct {
	cfg *Config
	mn  mocknet.Mocknet
	tr  *Traffic

	mu    sync.Mutex
	hosts map[int]host.Host // live nodes' hosts
	nodes map[int]*overlay.Node
	live  map[int]*liveStreams // live nodes' open streams
}

func newMemFabric(cfg *Config) *memFabric {
	return &memFabric{cfg: cfg, mn: mocknet.New(), tr: newTraffic(), hosts: map[int]host.Host{}, nodes: map[int]*overlay.Node{},
		live: map[int]*liveStreams{}}
}

func (f *memFabric) start(ctx context.Context, i int, sk crypto.PrivKey, boot int) (Member, error) {
	addr := ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", (i>>16)&0xff, (i>>8)&0xff, i&0xff))
	h, err := f.mn.AddPeer(sk, addr)
	if err != nil {
		return nil, fmt.Errorf("testnet: peer %d: %w", i, err)
	}
	f.mu.Lock()
	others := make(map[int]host.Host, len(f.hosts))
	for j, o := range f.hosts {
		others[j] = o
	}
	f.hosts[i] = h
	live := &liveStreams{}
	f.live[i] = live
	f.mu.Unlock()
	for j := range others {
		if err := f.mend(i, j); err != nil {
			return nil, err
		}
	}
	var bootInfo []peer.AddrInfo
	if b, ok := others[boot]; ok {
		bootInfo = []peer.AddrInfo{{ID: b.ID(), Addrs: b.Addrs()}}
	}
	cm, err := overlay.NewConnManager(overlay.ReachabilityPublic)
	if err != nil {
		return nil, err
	}
	h.Network().Notify(cm.Notifee())
	cfg := f.cfg
	n, err := overlay.New(ctx,
		overlay.WithHost(countingHost{managedHost{h, cm}, f.tr.node(h.ID()), live}), overlay.WithTarget(cfg.Target),
		overlay.WithIntervals(cfg.AnnounceInterval, cfg.ReevaluateInterval),
		overlay.WithLogger(cfg.Logger.With("node", i)),
		overlay.WithStrategy(cfg.Strategy), overlay.WithGeometric(cfg.Geometric, cfg.PingInterval, cfg.TokenInterval), overlay.WithGeoRelocate(cfg.GeoRelocate),
		overlay.WithElection(cfg.Election, cfg.Quorum), overlay.WithIgnoreFlaps(cfg.IgnoreFlaps),
		overlay.WithBootstrap(bootInfo...),
	)
	if err != nil {
		return nil, fmt.Errorf("testnet: node %d: %w", i, err)
	}
	f.mu.Lock()
	f.nodes[i] = n
	f.mu.Unlock()
	return n, nil
}

// managedHost is a mocknet host with the connection manager a node builds
// for its own host (overlay.NewConnManager), which mocknet's hosts lack:
// without it every node kept a connection to every peer it had ever
// dialled, as no real node does, and the testnet's memory grew as n² (at
// 64 nodes, 61 connections and some 250 stream goroutines a node).
type managedHost struct {
	host.Host
	cm *connmgr.BasicConnMgr
}

func (h managedHost) ConnManager() coreconnmgr.ConnManager { return h.cm }

func (h managedHost) Close() error { return errors.Join(h.Host.Close(), h.cm.Close()) }

// peers returns the hosts' IDs of nodes i and j.
func (f *memFabric) peers(i, j int) (a, b peer.ID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hi, hj := f.hosts[i], f.hosts[j]
	if hi == nil || hj == nil {
		return "", "", fmt.Errorf("testnet: nodes %d and %d are not both live", i, j)
	}
	return hi.ID(), hj.ID(), nil
}

// mend links nodes i and j, with the matrix's delay.
func (f *memFabric) mend(i, j int) error {
	a, b, err := f.peers(i, j)
	if err != nil {
		return err
	}
	l, err := f.mn.LinkPeers(a, b)
	if err != nil {
		return err
	}
	if f.cfg.Latency != nil {
		rtt, _ := f.cfg.Latency.RTT(i, j) // filled in by Config.fill
		l.SetOptions(mocknet.LinkOptions{Latency: rtt / 2})
	}
	return nil
}

// cut unlinks nodes i and j and cuts their open connections too
// (unlinking only stops new ones), and their streams (see liveStreams).
func (f *memFabric) cut(i, j int) error {
	a, b, err := f.peers(i, j)
	if err != nil {
		return err
	}
	if len(f.mn.LinksBetweenPeers(a, b)) == 0 {
		return nil
	}
	err = errors.Join(f.mn.UnlinkPeers(a, b), f.mn.DisconnectPeers(a, b))
	f.mu.Lock()
	li, lj := f.live[i], f.live[j]
	f.mu.Unlock()
	li.reset(b)
	lj.reset(a)
	return err
}

// kill closes node i. For a crash it cuts every link of the node first,
// so that no peer hears from it again (a closed mocknet host alone would
// still accept connections) and its Close says no goodbye; graceful, it
// closes it first (its goodbye goes out) and cuts the links after.
func (f *memFabric) kill(i int, graceful bool) error {
	f.mu.Lock()
	n := f.nodes[i]
	var others []int
	for j := range f.hosts {
		if j != i {
			others = append(others, j)
		}
	}
	f.mu.Unlock()
	if n == nil {
		return fmt.Errorf("testnet: no live node %d", i)
	}
	var errs []error
	if graceful {
		errs = append(errs, n.Close())
	}
	for _, j := range others {
		errs = append(errs, f.cut(i, j))
	}
	f.mu.Lock()
	live := f.live[i]
	delete(f.hosts, i)
	delete(f.nodes, i)
	delete(f.live, i)
	f.mu.Unlock()
	if !graceful {
		errs = append(errs, n.Close())
	}
	live.reset("")
	return errors.Join(errs...)
}

// failed is empty: an in-process node does not stop by itself.
func (f *memFabric) failed() []error { return nil }

// close stops every node, concurrently, and the network.
func (f *memFabric) close() error {
	f.mu.Lock()
	nodes, live := f.nodes, f.live
	f.nodes, f.hosts, f.live = map[int]*overlay.Node{}, map[int]host.Host{}, map[int]*liveStreams{}
	f.mu.Unlock()
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	for _, n := range nodes {
		wg.Go(func() {
			err := n.Close()
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		})
	}
	wg.Wait()
	for _, l := range live {
		l.reset("")
	}
	return errors.Join(append(errs, f.mn.Close())...)
}
