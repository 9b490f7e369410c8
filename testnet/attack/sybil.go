package attack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/superpeer/superpeer/gossip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// Sybils is issue 19's finding 7: many identities from one address,
// each claiming a superpeer with a valid signed announcement, on every
// channel the overlay has for it (the attacker need not know which
// strategy the swarm runs):
//
//   - on the membership topic (the geometric strategy's), an
//     announcement that claims a superpeer at k = 0;
//   - on the backbone topic (the DHT strategy's superpeers'), a summary
//     of a cluster of one at k = 0, as a superpeer publishes it;
//   - with the DHT strategy's cluster-scoped membership, unless
//     OneConnection, a registration with the superpeer of its cluster
//     (Roster), every interval, of the same announcement as on the
//     membership topic: the superpeer's roster takes it, and hands it to
//     the cluster's members.
//
// One GossipSub host (the publisher) publishes on the topics for them
// all, each message signed with its identity's key, as GossipSub lets any
// client do; unless SybilConfig.OneConnection, each identity is also a
// host of its own (TCP, no protocols but libp2p's; it opens register
// streams, a registration's sender being the stream's peer) connected to
// the bootstrap peers, so that each is seen on a connection from the one
// address, as identities behind one address are. The filed attack: 200
// identities from 127.0.0.1, one connection or one each.
type Sybils struct {
	pub     host.Host
	hosts   []host.Host // one per identity, unless OneConnection
	rosters []*Roster   // one per host
	bb      *pubsub.Topic
	ids     []peer.ID
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// SybilConfig configures Sybils.
type SybilConfig struct {
	// Network is the overlay's network name.
	Network string
	// N is the number of identities.
	N int
	// Keys are the identities' keys, N of them; default: N fresh keys.
	// A test that needs the identities spread over the clusters in a
	// known way grinds them (at random, N sybils fall into the clusters
	// of a swarm as a binomial: with 20 and two clusters, one in a
	// hundred runs gives one cluster MaxPerAddr or fewer).
	Keys []crypto.PrivKey
	// Listen is the one address they listen on, and so dial from (TCP
	// dials from its listening address); default 127.0.0.1.
	Listen string
	// Bootstrap are the overlay peers the publisher and every identity
	// connect to.
	Bootstrap []peer.AddrInfo
	// Interval is the announcement period; default 1 s.
	Interval time.Duration
	// OneConnection: the identities have no hosts; only the publisher
	// connects, and relays their announcements.
	OneConnection bool
}

// StartSybils starts the publisher and the identities, connects them to
// the bootstrap peers (retrying until ctx ends) and starts announcing;
// Close stops them.
func StartSybils(ctx context.Context, cfg SybilConfig) (*Sybils, error) {
	if cfg.N <= 0 || cfg.Network == "" {
		return nil, fmt.Errorf("attack: sybils need a network and N > 0 (got %q, %d)", cfg.Network, cfg.N)
	}
	if cfg.Keys != nil && len(cfg.Keys) != cfg.N {
		return nil, fmt.Errorf("attack: %d sybil keys for N = %d", len(cfg.Keys), cfg.N)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Sybils{cancel: cancel}
	if err := s.start(ctx, runCtx, cfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sybils) start(ctx, runCtx context.Context, cfg SybilConfig) error {
	listen := libp2p.ListenAddrStrings("/ip4/" + cfg.Listen + "/tcp/0")
	var err error
	if s.pub, err = libp2p.New(listen); err != nil {
		return fmt.Errorf("attack: sybil publisher: %w", err)
	}
	ps, err := pubsub.NewGossipSub(runCtx, s.pub)
	if err != nil {
		return fmt.Errorf("attack: sybil gossipsub: %w", err)
	}
	topic, err := ps.Join(gossip.MembershipTopic(cfg.Network))
	if err != nil {
		return fmt.Errorf("attack: sybil topic: %w", err)
	}
	backbone, err := ps.Join(gossip.BackboneTopic(cfg.Network))
	if err != nil {
		return fmt.Errorf("attack: sybil backbone: %w", err)
	}
	s.bb = backbone
	if err := connectAll(ctx, s.pub, cfg.Bootstrap); err != nil {
		return err
	}
	keys := make([]crypto.PrivKey, cfg.N)
	addrs := make([][]string, cfg.N)
	for i := range keys {
		if i < len(cfg.Keys) {
			keys[i] = cfg.Keys[i]
		} else if keys[i], _, err = crypto.GenerateEd25519Key(nil); err != nil {
			return fmt.Errorf("attack: sybil key: %w", err)
		}
		id, _ := peer.IDFromPrivateKey(keys[i])
		s.ids = append(s.ids, id)
		addrs[i] = multiaddrStrings(s.pub)
		if cfg.OneConnection {
			continue
		}
		h, err := libp2p.New(libp2p.Identity(keys[i]), listen, libp2p.Transport(tcp.NewTCPTransport),
			libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableRelay())
		if err != nil {
			return fmt.Errorf("attack: sybil host: %w", err)
		}
		s.hosts = append(s.hosts, h)
		addrs[i] = multiaddrStrings(h)
		if err := connectAll(ctx, h, cfg.Bootstrap); err != nil {
			return err
		}
		rec, err := seal(h, gossip.Announcement{ID: id, Addrs: h.Addrs(), Superpeer: true, Seq: uint64(time.Now().UnixNano())})
		if err != nil {
			return fmt.Errorf("attack: sybil record: %w", err)
		}
		s.rosters = append(s.rosters, newRoster(h, cfg.Network, rec))
	}
	for _, r := range s.rosters {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r.run(runCtx, cfg.Interval)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		for seq := uint64(1); ; seq++ {
			for i, k := range keys {
				_ = topic.Publish(runCtx, Announcement(addrs[i], seq, true), pubsub.WithSecretKeyAndPeerId(k, s.ids[i]))
				if b, err := (gossip.Summary{K: 0, Size: 1, Seq: seq}).Encode(); err == nil {
					_ = backbone.Publish(runCtx, b, pubsub.WithSecretKeyAndPeerId(k, s.ids[i]))
				}
			}
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// connectAll connects h to every peer, retrying (as an attacker would: a
// loaded peer may time a handshake out) until ctx ends.
func connectAll(ctx context.Context, h host.Host, peers []peer.AddrInfo) error {
	for _, b := range peers {
		for {
			err := h.Connect(ctx, b)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("attack: %s to %s: %w", h.ID(), b.ID, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func multiaddrStrings(h host.Host) []string {
	out := make([]string, 0, len(h.Addrs()))
	for _, a := range h.Addrs() {
		out = append(out, a.String())
	}
	return out
}

// Announcement is a membership announcement, as the overlay's membership
// topic carries it (gossip/announce.go's JSON, written here by hand): k =
// 0, so its cluster key is all zeros and valid for any ID; superpeer says
// what it claims. GossipSub signs it with its author's key.
func Announcement(addrs []string, seq uint64, superpeer bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"v": gossip.AnnouncementVersion, "seq": seq, "addrs": addrs, "superpeer": superpeer, "k": 0, "cluster": strings.Repeat("00", 32),
	})
	return b
}

// Registered counts the identities whose last registration a superpeer
// took (with the DHT strategy; none with OneConnection).
func (s *Sybils) Registered() int {
	n := 0
	for _, r := range s.rosters {
		if st := r.Last(); st == RegUnchanged || st == RegDelta || st == RegSnapshot {
			n++
		}
	}
	return n
}

// Answered counts the identities whose last registration a superpeer
// answered: took, or refused because their address is crowded (the
// registry's identities per address, MaxPerAddr).
func (s *Sybils) Answered() int {
	n := 0
	for _, r := range s.rosters {
		if st := r.Last(); st == RegUnchanged || st == RegDelta || st == RegSnapshot || st == RegCrowded {
			n++
		}
	}
	return n
}

// BackbonePeers are the peers the publisher knows on the backbone topic:
// the superpeers its summaries go to (with the DHT strategy).
func (s *Sybils) BackbonePeers() []peer.ID { return s.bb.ListPeers() }

// IDs are the sybils' identities.
func (s *Sybils) IDs() []peer.ID { return slices.Clone(s.ids) }

// Close stops the sybils.
func (s *Sybils) Close() error {
	s.cancel()
	s.wg.Wait()
	var errs []error
	if s.pub != nil {
		errs = append(errs, s.pub.Close())
	}
	for _, h := range s.hosts {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}

// DHTOnly is issue 19's finding 9: a host that speaks only the overlay's
// DHT protocol (kad-dht with the overlay's prefix, server mode), no
// membership topic, no closer protocol. The overlay's routing tables
// took it in; now they refuse it (overlay/table.go), and it must count
// for nothing.
type DHTOnly struct {
	Host host.Host
	DHT  *dht.IpfsDHT
}

// StartDHTOnly starts it on listen (default 127.0.0.1), connects it to the
// bootstrap peers and refreshes its routing table, so that they learn it.
func StartDHTOnly(ctx context.Context, network, listen string, bootstrap []peer.AddrInfo) (*DHTOnly, error) {
	if listen == "" {
		listen = "127.0.0.1"
	}
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/" + listen + "/tcp/0"))
	if err != nil {
		return nil, fmt.Errorf("attack: host: %w", err)
	}
	d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(protocol.ID("/superpeer/"+network)),
		dht.BootstrapPeers(bootstrap...))
	if err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("attack: dht: %w", err)
	}
	if err := connectAll(ctx, h, bootstrap); err != nil {
		_ = d.Close()
		_ = h.Close()
		return nil, err
	}
	d.RefreshRoutingTable()
	return &DHTOnly{Host: h, DHT: d}, nil
}

// Close stops it.
func (a *DHTOnly) Close() error { return errors.Join(a.DHT.Close(), a.Host.Close()) }
