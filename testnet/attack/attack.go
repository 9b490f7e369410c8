package attack

import (
	"context"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Target is what an attack knows of the swarm it attacks: what any
// outsider can learn (the network's name, its nodes' addresses).
type Target struct {
	// Network is the overlay's network name: its protocols' and topics'
	// prefix ("default" unless the swarm was given another).
	Network string
	// Victim is the node under attack; Nodes are all the swarm's nodes,
	// the victim among them.
	Victim peer.AddrInfo
	Nodes  []peer.AddrInfo
	// Seed seeds the attack's randomness (its identities, its timing).
	Seed uint64
}

// Attack is one attack of the live attack suite.
type Attack struct {
	// Name names it in the suite's table; Finding is what it tries, in a
	// few words.
	Name, Finding string
	// Run attacks t until ctx ends, then releases what it holds (hosts,
	// streams). An error means it could not attack at all.
	Run func(ctx context.Context, t Target) error
	// Geometric: the attack is on the geometric strategy's tokens, and
	// needs a swarm that runs it.
	Geometric bool
}

// All returns the attacks of the live attack suite, in the suite's order.
func All() []Attack {
	return []Attack{
		{Name: "none", Finding: "no attack: the baseline of every figure", Run: func(ctx context.Context, _ Target) error {
			<-ctx.Done()
			return nil
		}},
		{Name: "bad-frames", Finding: "malformed frames on every protocol, a fresh identity after each ban", Run: BadFrames},
		{Name: "election-flood", Finding: "a member ranked below the victim sends it valid ELECTIONs at 45/s, a fresh identity after each ban (finding 1)", Run: ElectionFloodAttack},
		{Name: "token-forgery", Finding: "a member claims every token one pass above its holder and passes them to the victim, a fresh identity after each ban; geometric swarm (finding 3)", Run: Tokens, Geometric: true},
		{Name: "dht-stall", Finding: "stalled kad-dht streams, 4 fresh identities a second (finding 6)", Run: DHTStall},
		{Name: "election-memory", Finding: "190 KiB election messages from no member and stalled election streams, fresh identities (finding 6)", Run: ElectionMemory},
		{Name: "subscriptions", Finding: "800,000 GossipSub subscriptions a second from 2 fresh identities (finding 6)", Run: Subscriptions},
		{Name: "ghost-backbone", Finding: "backbone summaries under keys no host holds, signed by one publisher as fast as the superpeers take them: 7 ground into the victim's cluster, 8 in every cluster at k+1, each claiming 2^20 members (hostile-peer audit)", Run: GhostBackbone},
		{Name: "banned-redial", Finding: "a banned client redialling as fast as it can (finding 8)", Run: BannedRedial},
	}
}

// Find returns the attack named name.
func Find(name string) (Attack, error) {
	for _, a := range All() {
		if a.Name == name {
			return a, nil
		}
	}
	return Attack{}, fmt.Errorf("attack: no attack %q", name)
}
