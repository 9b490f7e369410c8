package bench

import (
	"math"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet"
)

// fakeMember is a testnet.Member with a fixed state.
type fakeMember struct {
	id peer.ID
	st overlay.State
}

func (m fakeMember) ID() peer.ID                          { return m.id }
func (m fakeMember) State() overlay.State                 { return m.st }
func (m fakeMember) ElectionStats() overlay.ElectionStats { return overlay.ElectionStats{} }

// byRole attributes each node's window (sent plus received) to the role it
// has at the end: two ordinary peers and a superpeer serving them and one
// more member, over a 10 s window.
func TestLiveScaleByRole(t *testing.T) {
	const (
		gossip   = protocol.ID("/meshsub/1.1.0")
		register = protocol.ID("/superpeer/default/register/1.0.0")
	)
	sp, a, b := peer.ID("sp"), peer.ID("a"), peer.ID("b")
	nodes := []testnet.Member{
		fakeMember{sp, overlay.State{Role: overlay.RoleSuperpeer, Members: []peer.ID{sp, a, b, "c"}}},
		fakeMember{a, overlay.State{Role: overlay.RoleOrdinary}},
		fakeMember{b, overlay.State{Role: overlay.RoleOrdinary}},
	}
	nb := func(sent, recv map[protocol.ID]uint64) testnet.NodeBytes {
		return testnet.NodeBytes{Sent: sent, Received: recv}
	}
	before := map[peer.ID]testnet.NodeBytes{
		sp: nb(map[protocol.ID]uint64{register: 1000}, map[protocol.ID]uint64{register: 1000}),
		a:  nb(map[protocol.ID]uint64{register: 500}, nil),
		// b had sent nothing before the window.
	}
	after := map[peer.ID]testnet.NodeBytes{
		sp: nb(map[protocol.ID]uint64{register: 1300, gossip: 600}, map[protocol.ID]uint64{register: 1300}),
		a:  nb(map[protocol.ID]uint64{register: 600}, map[protocol.ID]uint64{register: 100}),
		b:  nb(map[protocol.ID]uint64{register: 200, gossip: 200}, map[protocol.ID]uint64{register: 200}),
	}
	var row LiveScaleRow
	row.byRole(nodes, before, after, 10)
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"ordinary mean", row.Ordinary, (20 + 60) / 2.0},
		{"ordinary max", row.OrdinaryMax, 60},
		{"ordinary register", row.OrdinaryByProtocol["register"], (20 + 40) / 2.0},
		{"ordinary gossip", row.OrdinaryByProtocol["gossip"], (0 + 20) / 2.0},
		{"superpeer mean", row.Superpeer, 120},
		{"superpeer max", row.SuperpeerMax, 120},
		{"superpeer per member", row.SuperpeerPerMember, 40},
		{"superpeer register", row.SuperpeerByProtocol["register"], 60},
		{"superpeer gossip", row.SuperpeerByProtocol["gossip"], 60},
		{"members per superpeer", row.MembersPerSuperpeer, 3},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v B/s, want %v", c.what, c.got, c.want)
		}
	}
	if row.SuperpeersSeen != 1 {
		t.Errorf("superpeers seen: %d, want 1", row.SuperpeersSeen)
	}
}
