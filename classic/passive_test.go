package classic

import (
	"slices"
	"testing"
)

// TestPassive runs every algorithm that implements Passive on four
// processes, one of them passive, the lowest-ranked ("0") or the highest
// ("3"), and checks what the mode promises: its clock and failure
// detector run, so that when the leader dies it follows the leader the
// others elect (a machine that was simply not ticked never suspected the
// dead leader, and refused the heir's COORDINATOR or named the dead
// leader alive in its votes); and it is never the leader while passive,
// not even alone. Made active again, alone, it leads.
func TestPassive(t *testing.T) {
	for _, name := range Algorithms() {
		ids := tnIDs(4)
		probe, err := New(name, tnCfg(ids[0], ids), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := probe.(Passive); !ok {
			if name != "invitation" {
				t.Errorf("%s does not implement Passive", name)
			}
			continue
		}
		for _, p := range []ID{"0", "3"} {
			t.Run(name+"/passive"+string(p), func(t *testing.T) {
				n := newTnet(t, ids, func(id ID) Machine { return tnMust[Machine](t)(New(name, tnCfg(id, ids), Options{})) })
				n.unreachable = true
				n.nodes[p].(Passive).SetPassive(true)
				// The active processes from the highest down.
				active := slices.DeleteFunc(slices.Clone(ids), func(id ID) bool { return id == p })
				slices.Reverse(active)
				// Echo has no failure detector of its own (the driver is
				// its detector): the driver makes the survivors campaign.
				detect := func(ids ...ID) {
					if name == "echo" {
						for _, id := range ids {
							n.campaign(id)
						}
					}
				}
				n.campaign(active[len(active)-1])
				detect(active[0])
				n.runUntil(100, "following "+string(active[0]), func() bool { return n.agree(active[0]) })

				n.crash(active[0])
				detect(active[1])
				n.runUntil(100, "following "+string(active[1])+" after the leader died", func() bool { return n.agree(active[1]) })

				for _, id := range active[1:] {
					n.crash(id)
				}
				detect(p) // passive: it starts nothing
				for i := range 200 {
					n.run(1)
					if st := n.state(p); st.Role == Leader || st.Leader == p {
						t.Fatalf("tick %d alone and passive: %+v", i, st)
					}
				}
				if st := n.state(p); st.Leader == active[1] && name != "echo" {
					// Echo keeps the leader it knows until an election
					// reaches it; the others' detectors drop a dead one.
					t.Errorf("alone and passive, 200 ticks after the leader died: still following it: %+v", st)
				}

				n.nodes[p].(Passive).SetPassive(false)
				detect(p)
				n.runUntil(100, string(p)+" leading alone once active", func() bool { return n.agree(p) })
			})
		}
	}
}

// TestPassiveTakesOverNoOne: a passive candidate that hears a lower
// candidate lead (its heartbeat, or a COORDINATOR naming it) does not
// take over, as an active one does (found in review: it broadcast its
// own COORDINATOR and led).
func TestPassiveTakesOverNoOne(t *testing.T) {
	ids := tnIDs(4)
	for _, passive := range []bool{false, true} {
		for _, typ := range []MsgType{MsgHeartbeat, MsgCoordinator} {
			c := tnMust[*CandidateElection](t)(NewCandidate(tnCfg("1", ids), ids))
			c.SetPassive(passive)
			c.Step(Message{Type: typ, From: "0", To: "1", Leader: "0"})
			if st := c.Ready().State; (st.Role == Leader || st.Leader == "1") != !passive {
				t.Errorf("passive=%v, %v from the lower candidate 0: %+v", passive, typ, st)
			}
		}
	}
}

// TestPassiveFollowsNotItself: a stable COORDINATOR of a higher term that
// names the passive process does not make it lead (found in review).
func TestPassiveFollowsNotItself(t *testing.T) {
	ids := tnIDs(3)
	s := tnMust[*Stable](t)(NewStable(tnCfg("0", ids)))
	s.SetPassive(true)
	s.Step(Message{Type: MsgCoordinator, From: "2", To: "0", Term: 1, Leader: "0"})
	if st := s.Ready().State; st.Role == Leader || st.Leader == "0" {
		t.Errorf("passive stable process named by a COORDINATOR: %+v", st)
	}
}

// TestPassiveStableTakesNoOnesWord: a stable process without a leader (a
// fresh machine) polls them all rather than follow one member's
// heartbeat, passive as active. A passive one that only forgot followed
// a hostile member's heartbeat of a higher term at once, held to it while
// the member kept sending, and, that term above the live leader's, kept
// refusing the live leader's heartbeats after the member fell silent
// (found in review).
func TestPassiveStableTakesNoOnesWord(t *testing.T) {
	ids := tnIDs(3)
	for _, passive := range []bool{false, true} {
		n := newTnet(t, ids, func(id ID) Machine { return tnMust[*Stable](t)(NewStable(tnCfg(id, ids))) })
		n.campaign("2")
		n.runUntil(50, "following 2", func() bool { return n.agree("2") })
		n.restart("0", tnMust[*Stable](t)(NewStable(tnCfg("0", ids)))) // a rebuild
		n.nodes["0"].(Passive).SetPassive(passive)
		held := 0
		for range 100 {
			// The hostile 1 tells 0 of a term above the leader's.
			n.nodes["0"].Step(Message{Type: MsgHeartbeat, From: "1", To: "0", Term: n.nodes["2"].(*Stable).term + 1, Leader: "1"})
			n.collect("0")
			n.run(1, "0", "2")
			if n.state("0").Leader == "1" {
				held++
			}
		}
		if held > 0 {
			t.Errorf("passive=%v: 0 followed the hostile 1 for %d of 100 ticks", passive, held)
		}
		n.crash("1") // silent now
		n.runUntil(200, "0 following the live leader 2", func() bool { return n.state("0").Leader == "2" })
	}
}

// TestPassiveHoldsNoOneBack: two processes, the higher passive (views
// that disagree on who ranks last can make one): the lower one leads,
// under every algorithm. A passive bully answered its ELECTION with OK
// and never announced, a passive ring-max carried itself as the max: the
// lower one stayed a candidate (found in review).
func TestPassiveHoldsNoOneBack(t *testing.T) {
	ids := tnIDs(2)
	for _, name := range Algorithms() {
		if name == "invitation" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			n := newTnet(t, ids, func(id ID) Machine { return tnMust[Machine](t)(New(name, tnCfg(id, ids), Options{})) })
			n.unreachable = true
			n.nodes["1"].(Passive).SetPassive(true)
			n.campaign("0")
			n.runUntil(300, "0 leading, 1 following it", func() bool { return n.agree("0") })
		})
	}
}
