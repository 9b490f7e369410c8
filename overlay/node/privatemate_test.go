package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
)

// TestFailsOverWithPrivateMate: three machines of each election, with
// and without Quorum, the last by the key private (it ranks last, below
// public mates: the hushed rule's case). The leader dies at 20 s; the
// second leads within 20 s more, and the private member follows it. With
// the private member's quorum machine hushed (not ticked), its vote ran
// on a stopped clock and refused every claim: the survivor was still a
// candidate 40 s later (found in review).
func TestFailsOverWithPrivateMate(t *testing.T) {
	for _, alg := range classic.Algorithms() {
		for _, quorum := range []bool{false, true} {
			name := alg
			if quorum {
				name += "+quorum"
			}
			t.Run(name, func(t *testing.T) { failsOverWithPrivateMate(t, alg, quorum) })
		}
	}
}

func failsOverWithPrivateMate(t *testing.T, alg string, quorum bool) {
	ids := []peer.ID{"a", "b", "c"}
	dhtselect.SortByKey(ids) // k = 0: the first ranks first
	leader, next, priv := ids[0], ids[1], ids[2]
	ms := map[peer.ID]*Machine{}
	for _, id := range ids {
		cfg := testConfig(string(id))
		cfg.Election, cfg.Quorum = alg, quorum
		cfg.AnnounceInterval, cfg.ReevaluateInterval = time.Second, time.Second
		cfg.Private = id == priv
		ms[id] = mustNew(t, cfg)
		var v View
		for _, o := range ids {
			v.Members = append(v.Members, Member{ID: o, Private: o == priv})
		}
		ms[id].Step(t0, v)
	}
	var dead peer.ID
	now := t0
	run := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); now = now.Add(100 * time.Millisecond) {
			for _, id := range ids {
				if id == dead {
					continue
				}
				if ms[id].Due(now) {
					ms[id].Step(now, routing(1))
				}
				ms[id].Tick(now)
			}
			// Deliver until quiet: lookups name the live first by the key.
			for again := true; again; {
				again = false
				for _, id := range ids {
					if id == dead {
						continue
					}
					rd := ms[id].Ready()
					for _, l := range rd.Lookups {
						ans := leader
						if dead != "" {
							ans = next
						}
						ms[id].Step(now, LookupDone{Key: l.Key, Superpeer: ans, Queries: 1})
						again = true
					}
					for _, o := range rd.Messages {
						switch to := peer.ID(o.Msg.To); {
						case to == dead:
							// The driver's send fails: the dead peer's
							// connection is gone.
							ms[id].Step(now, SendFailed{To: to, Gen: o.Gen})
							again = true
						case ms[to] != nil:
							ms[to].Step(now, ElectionMessage{Msg: o.Msg})
							again = true
						}
					}
				}
			}
		}
	}
	run(20 * time.Second)
	for _, id := range ids {
		if got := ms[id].Election().Leader; got != leader {
			t.Fatalf("before the leader died: %s's election names %q, want %q", id, got, leader)
		}
	}
	dead = leader
	run(20 * time.Second)
	for _, id := range []peer.ID{next, priv} {
		if e := ms[id].Election(); e.Leader != next {
			t.Errorf("20 s after the leader died: %s's election %+v; want %q leading", id, e, next)
		}
	}
}
