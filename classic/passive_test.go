package classic

import "testing"

// TestPassive runs every algorithm that implements Passive on four
// processes, the lowest-ranked ("0") passive, and checks what the mode
// promises: its clock and failure detector run, so that when the leader
// dies it follows the leader the others elect (a machine that was simply
// not ticked never suspected the dead leader, and refused the heir's
// COORDINATOR or named the dead leader alive in its votes); and it never
// takes the leadership while passive, not even alone. Made active again,
// alone, it leads.
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
		t.Run(name, func(t *testing.T) {
			n := newTnet(t, ids, func(id ID) Machine { return tnMust[Machine](t)(New(name, tnCfg(id, ids), Options{})) })
			n.unreachable = true
			n.nodes["0"].(Passive).SetPassive(true)
			// Echo has no failure detector of its own (the driver is
			// its detector): the driver makes the survivors campaign.
			detect := func(ids ...ID) {
				if name == "echo" {
					for _, id := range ids {
						n.campaign(id)
					}
				}
			}
			detect("3")
			n.runUntil(100, "following 3", func() bool { return n.agree("3") })

			n.crash("3")
			detect("2")
			n.runUntil(100, "following 2 after 3 died", func() bool { return n.agree("2") })

			n.crash("2")
			n.crash("1")
			detect("0") // passive: it starts nothing
			for i := range 200 {
				n.run(1)
				if st := n.state("0"); st.Role == Leader || st.Leader == "0" {
					t.Fatalf("tick %d alone and passive: %+v", i, st)
				}
			}
			if st := n.state("0"); st.Leader == "2" && name != "echo" {
				// Echo keeps the leader it knows until an election
				// reaches it; the others' detectors drop a dead one.
				t.Errorf("alone and passive, 200 ticks after the leader died: still following it: %+v", st)
			}

			n.nodes["0"].(Passive).SetPassive(false)
			detect("0")
			n.runUntil(100, "0 leading alone once active", func() bool { return n.agree("0") })
		})
	}
}
