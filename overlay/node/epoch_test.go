package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// The defence against ID grinding (epoch.go), fed by hand: a node h in a
// cluster (S = 1: the whole key space) with honest peers a..d, whose
// announcements carry their hash chains' values, and the lookups answered
// by an oracle, the member of the view closest to the key asked for.

const testEpoch = time.Minute

// chained is a peer of the test with its hash chain.
type chained struct {
	id    peer.ID
	since uint64
	chain *dhtselect.Chain
	salt  dhtselect.Beacon // the salt part it announces, if any
}

func newChained(id string, since uint64) *chained {
	var secret dhtselect.Salt
	copy(secret[:], id)
	return &chained{id: peer.ID(id), since: since, chain: dhtselect.NewChain(secret, since, 1000)}
}

func (c *chained) member(now time.Time) Member {
	cur := dhtselect.EpochOf(now, testEpoch)
	v, _ := c.chain.Value(cur + 1)
	b := c.salt
	b.Since, b.Next, b.Reveal = c.since, cur+1, v
	return Member{ID: c.id, Beacon: b}
}

// epochNet drives one machine among chained peers.
type epochNet struct {
	t     *testing.T
	m     *Machine
	now   time.Time
	peers []*chained
}

func newEpochNet(t *testing.T, self string, cfg func(*Config), peers ...*chained) *epochNet {
	c := testConfig(self)
	c.Epoch = EpochConfig{Length: testEpoch, Chain: 1000}
	if cfg != nil {
		cfg(&c)
	}
	n := &epochNet{t: t, m: mustNew(t, c), now: t0, peers: peers}
	n.view()
	return n
}

func (n *epochNet) view() {
	v := View{Members: []Member{{ID: n.m.cfg.Self}}}
	for _, p := range n.peers {
		v.Members = append(v.Members, p.member(n.now))
	}
	n.m.Step(n.now, v)
}

// run advances the machine by d, a view every 5 s, the lookups answered
// by the oracle; check is called after every tick.
func (n *epochNet) run(d time.Duration, check func()) {
	for end := n.now.Add(d); n.now.Before(end); n.now = n.now.Add(100 * time.Millisecond) {
		if n.now.Sub(t0)%(5*time.Second) == 0 {
			n.view()
		}
		if n.m.Due(n.now) {
			n.m.Step(n.now, routing(0))
		}
		n.m.Tick(n.now)
		for _, l := range n.m.Ready().Lookups {
			n.m.Step(n.now, LookupDone{Key: l.Key, Superpeer: n.closest(l.Key), Queries: 1})
			n.m.Ready()
		}
		if check != nil {
			check()
		}
	}
}

// closest is the lookup's oracle: the member closest to key.
func (n *epochNet) closest(key dhtselect.Key) peer.ID {
	best := n.m.cfg.Self
	for _, p := range n.peers {
		if dhtselect.Closer(dhtselect.KeyOf(p.id), dhtselect.KeyOf(best), key) {
			best = p.id
		}
	}
	return best
}

// grind returns the best of tries IDs for key: the one whose Kademlia
// key is closest to it (as testnet/attack.Grind does with key pairs).
func grind(key dhtselect.Key, tries int) peer.ID {
	var best peer.ID
	for i := range tries {
		id := peer.ID(fmt.Sprintf("grinder-%d", i))
		if best == "" || dhtselect.Closer(dhtselect.KeyOf(id), dhtselect.KeyOf(best), key) {
			best = id
		}
	}
	return best
}

// TestGroundIDIsNotSuperpeer: an ID ground until its key is the closest
// of the cluster to the cluster key (the filed attack: P AND mask), or to
// the cluster's salted target of the epoch (an attacker who knows the
// salt), joins a cluster whose members are old. The lookup ends at it;
// without the defence it would be the superpeer at once (as it was: issue
// 19, finding 5). With it, it is not eligible before MinAge-1 epochs have
// passed since the one it was first seen in, however old it says it is:
// the node names the eligible member
// closest to the target instead, all along.
func TestGroundIDIsNotSuperpeer(t *testing.T) {
	for _, against := range []string{"cluster key", "salted target"} {
		t.Run(against, func(t *testing.T) {
			e0 := dhtselect.EpochOf(t0, testEpoch)
			n := newEpochNet(t, "h", nil, newChained("a", e0-5), newChained("b", e0-5), newChained("c", e0-5), newChained("d", e0-5))
			n.run(3*testEpoch, nil)
			st := n.m.State()
			if st.Role == RoleUnknown || st.Superpeer == "" {
				t.Fatalf("no superpeer after three epochs: %+v", st)
			}
			key := st.ClusterKey
			if against == "salted target" {
				key = n.m.Epoch().Target
				if key == st.ClusterKey {
					t.Fatal("the target is the cluster key: no salt")
				}
			}
			g := grind(key, 20000)
			n.peers = append(n.peers, newChained(string(g), e0-100)) // it lies about its age
			n.view()
			if n.closest(key) != g {
				t.Fatalf("the ground ID %s is not the closest to %s", g, key)
			}
			firstSeen := dhtselect.EpochOf(n.now, testEpoch)
			served := 0
			n.run(dhtselect.EpochStart(firstSeen+MinAge-1, testEpoch).Sub(n.now)-time.Millisecond, func() {
				if st := n.m.State(); st.Superpeer == g {
					served++
				}
			})
			if served > 0 {
				t.Fatalf("the ground ID was the superpeer in %d ticks of its first %d epochs", served, MinAge-1)
			}
			if sp := n.m.State().Superpeer; sp == "" || !n.m.Eligible(sp) {
				t.Fatalf("superpeer %q, want an eligible member", sp)
			}
		})
	}
}

// TestSaltFromTheSuperpeersChain: at an epoch's start the salt comes from
// the chain value that the previous epoch's superpeer revealed, so two
// nodes that named the same superpeer take the same target, and it moves
// each epoch. A superpeer that revealed nothing is not eligible in the
// epoch.
func TestSaltFromTheSuperpeersChain(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	peers := func() []*chained {
		return []*chained{newChained("a", e0-5), newChained("b", e0-5), newChained("c", e0-5)}
	}
	n1 := newEpochNet(t, "h", nil, peers()...)
	n2 := newEpochNet(t, "i", nil, peers()...)
	var targets []dhtselect.Key
	for range 4 {
		n1.run(testEpoch, nil)
		n2.run(testEpoch, nil)
		if n1.m.Epoch() != (EpochStatus{Epoch: n1.m.Epoch().Epoch, Since: e0, Salt: n2.m.Epoch().Salt, Target: n2.m.Epoch().Target}) {
			t.Fatalf("the two nodes disagree: %+v and %+v", n1.m.Epoch(), n2.m.Epoch())
		}
		targets = append(targets, n1.m.Epoch().Target)
		sp := n1.m.State().Superpeer
		if sp != n2.m.State().Superpeer || sp == "" {
			t.Fatalf("superpeers %s and %s", sp, n2.m.State().Superpeer)
		}
	}
	for i := 1; i < len(targets); i++ {
		if targets[i] == targets[i-1] {
			t.Fatalf("the target did not move between epochs %d and %d", i-1, i)
		}
	}
	// The superpeer stops revealing: in the next epoch it is not eligible.
	sp := n1.m.State().Superpeer
	for _, p := range n1.peers {
		if p.id == sp {
			p.chain = dhtselect.NewChain(dhtselect.Salt{}, 0, 0) // values for epochs 0 and 1 only
		}
	}
	n1.run(testEpoch+10*time.Second, nil) // it revealed nothing for the next epoch
	if n1.m.Eligible(sp) || n1.m.State().Superpeer == sp {
		t.Fatalf("the superpeer %s revealed nothing and is still eligible, or superpeer (%s)", sp, n1.m.State().Superpeer)
	}
}

// TestSaltOfTheMajority: a node takes the salt that most eligible members
// of its cluster announce for the epoch, over the one it computed (a
// failover at the epoch's start), so that the members agree again.
func TestSaltOfTheMajority(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	a, b, c := newChained("a", e0-5), newChained("b", e0-5), newChained("c", e0-5)
	n := newEpochNet(t, "h", nil, a, b, c)
	n.run(3*testEpoch+10*time.Second, nil)
	st := n.m.Epoch()
	other := dhtselect.EpochSalt([]byte("other"), st.Epoch, nil)
	for _, p := range []*chained{a, b} {
		p.salt = dhtselect.Beacon{SaltEpoch: st.Epoch, K: 0, Cluster: n.m.State().ClusterKey, Salt: other}
	}
	n.run(10*time.Second, nil)
	if got := n.m.Epoch(); got.Salt != other || got.Target != dhtselect.SaltedTarget(n.m.State().ClusterKey, 0, other) {
		t.Fatalf("salt %s target %s, want the majority's %s", got.Salt, got.Target, other)
	}
	// One member alone (a liar) does not move it.
	a.salt, b.salt = dhtselect.Beacon{}, dhtselect.Beacon{}
	n.run(10*time.Second, nil)
	c.salt = dhtselect.Beacon{SaltEpoch: st.Epoch, K: 0, Cluster: n.m.State().ClusterKey, Salt: other}
	n.run(10*time.Second, nil)
	if got := n.m.Epoch(); got.Salt != st.Salt {
		t.Fatalf("salt %s, want its own %s against one liar", got.Salt, st.Salt)
	}
}

// TestFirstViewAfterJoining: a node that took a role while alone in its
// view (a joiner whose registrations had not answered yet, found by the
// node simulator at 500 ms from its cluster, and live on a loaded
// machine) believes the ages of the peers of the first view that holds
// any, as it would have before it joined. Had it counted them as new, it
// would have seen no member eligible for two epochs, kept the defence off,
// and, with an ID ground against the cluster key, claimed the cluster all
// along while its members named another.
func TestFirstViewAfterJoining(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	g := grind(dhtselect.Key{}, 20000) // the cluster key at S = 1
	n := newEpochNet(t, string(g), nil)
	n.run(10*time.Second, nil)
	if st := n.m.State(); st.Superpeer != g {
		t.Fatalf("alone, the node names %q superpeer, want itself", st.Superpeer)
	}
	n.peers = []*chained{newChained("a", e0-5), newChained("b", e0-5), newChained("c", e0-5)}
	n.view()
	served := 0
	n.run(20*time.Second, func() {
		if st := n.m.State(); st.Superpeer == g {
			served++
		}
	})
	for _, p := range n.peers {
		if !n.m.Eligible(p.id) {
			t.Errorf("%s, of age and in the node's first view with peers, is not eligible", p.id)
		}
	}
	if sp := n.m.State().Superpeer; sp == g || sp == "" || !n.m.Eligible(sp) {
		t.Fatalf("superpeer %q after 20 s, want an eligible member", sp)
	}
	if served > 5*10 {
		t.Errorf("the node named itself superpeer in %d ticks after its view filled, want at most a re-evaluation period's 50", served)
	}
}

// TestSilentPeerIsNotOld: a peer in the node's view before it joined is
// believed on its age only once it has said it (its beacon): an entry
// without one, a registration made before the peer's first role, is no
// claim to have started in epoch 0. A node that believed it counted a
// peer that had not joined yet eligible, barred itself, and named the
// peer, which named the node: two nodes that never agreed (overlay's
// TestBannedRedial).
func TestSilentPeerIsNotOld(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	a := newChained("a", e0-5)
	n := newEpochNet(t, "h", nil)
	silent := Member{ID: "z"}
	step := func() {
		n.m.Step(n.now, View{Members: []Member{{ID: n.m.cfg.Self}, a.member(n.now), silent}})
	}
	step()
	n.run(10*time.Second, nil)
	step()
	if !n.m.Eligible(a.id) {
		t.Errorf("a, old and in the view before the node joined, is not eligible")
	}
	if n.m.Eligible(silent.ID) {
		t.Errorf("z, which has announced no beacon, is eligible")
	}
	// Once it speaks, it is believed as an old peer.
	z := newChained("z", e0-4)
	silent = z.member(n.now)
	step()
	if !n.m.Eligible(z.id) {
		t.Errorf("z, old and now announcing since epoch %d, is not eligible", e0-4)
	}
}

// TestAloneLongBelievesNoStranger: a node believes the claimed age of a
// peer it saw before it joined, and of the peers of its first view with
// any when it joined alone and that view came soon after. Not later: a
// network's founder alone for ten epochs, or a node that joined with
// peers, counts a newcomer that claims to have started in epoch 0 as
// first seen now (else an ID ground against the salted target, joined
// by registering with such a node, would have skipped MinAge).
func TestAloneLongBelievesNoStranger(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	t.Run("alone", func(t *testing.T) {
		n := newEpochNet(t, "h", nil)
		n.run(10*testEpoch, nil)
		x := newChained("x", 1)
		n.peers = []*chained{x}
		n.view()
		if n.m.Eligible(x.id) {
			t.Errorf("x, claiming epoch 1 to a node alone for ten epochs, is eligible at once")
		}
	})
	t.Run("joined with peers", func(t *testing.T) {
		a := newChained("a", e0-5)
		n := newEpochNet(t, "h", nil, a)
		n.run(time.Second, nil)
		if !n.m.joined {
			t.Fatal("the node has not joined in a second")
		}
		x := newChained("x", 1)
		n.peers = append(n.peers, x)
		n.view()
		if !n.m.Eligible(a.id) {
			t.Errorf("a, old and in the view before the node joined, is not eligible")
		}
		if n.m.Eligible(x.id) {
			t.Errorf("x, first seen after the node joined with peers and claiming epoch 1, is eligible at once")
		}
	})
}

// TestDepartedMemberKeepsNoDefence: a node keeps the defence on for a
// membership TTL after the last eligible member left its view (a view
// that shrank for a moment), not longer. Node A saw an old member X,
// which left as a ground ID g arrived; g never saw X. Had A counted X
// for MinAge epochs it would have targeted the salted key while g, with
// no eligible member in view, targeted the cluster key, and each named
// itself.
func TestDepartedMemberKeepsNoDefence(t *testing.T) {
	e0 := dhtselect.EpochOf(t0, testEpoch)
	g := grind(dhtselect.Key{}, 20000)
	x, y := newChained("X", e0-5), newChained("y", e0)
	na := newEpochNet(t, "A", nil, x, y)
	na.run(10*time.Second, nil)
	if !na.m.Eligible(x.id) {
		t.Fatal("X, old and seen before A joined, is not eligible")
	}
	na.peers = []*chained{y, newChained(string(g), e0)} // X leaves, g arrives
	na.run(30*time.Second, nil)
	ng := newEpochNet(t, string(g), nil, newChained("A", e0), y)
	ng.run(30*time.Second, nil)
	a, gs := na.m.State(), ng.m.State()
	if a.Superpeer == "" || a.Superpeer != gs.Superpeer {
		t.Errorf("A names %q superpeer, g names %q: want one", a.Superpeer, gs.Superpeer)
	}
}
