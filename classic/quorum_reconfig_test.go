package classic

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// tnQuorumOf builds algo's machine with Quorum (New) for id among ids,
// with the stored HardState hs; a vote for a process no longer a member
// becomes a vote for id, as the node keeps it (the term stays).
func tnQuorumOf(t testing.TB, algo string, id ID, ids []ID, hs HardState) Machine {
	t.Helper()
	return tnQuorumLease(t, algo, tnCfg(id, slices.Clone(ids)), hs)
}

// tnQuorumLease is tnQuorumOf for the configuration cfg.
func tnQuorumLease(t testing.TB, algo string, cfg Config, hs HardState) Machine {
	t.Helper()
	if hs.Vote != None && !slices.Contains(cfg.Peers, hs.Vote) {
		hs.Vote = cfg.ID
	}
	return tnMust[Machine](t)(New(algo, cfg, Options{Quorum: true, HardState: hs}))
}

// reconfigureOrRebuild gives id the members ids as a driver does: in place
// when the machine takes the change (Reconfigurer), else a new machine
// with the stored HardState. It reports whether it was in place.
func (n *tnet) reconfigureOrRebuild(algo string, id ID, ids []ID) bool {
	n.t.Helper()
	return n.reconfigureCfg(algo, tnCfg(id, slices.Clone(ids)))
}

// reconfigureCfg is reconfigureOrRebuild with the configuration cfg.
func (n *tnet) reconfigureCfg(algo string, cfg Config) bool {
	n.t.Helper()
	id, ids := cfg.ID, cfg.Peers
	m := n.nodes[id]
	err := ErrRebuild
	if r, ok := m.(Reconfigurer); ok {
		err = r.Reconfigure(cfg)
	}
	if err == nil {
		n.collect(id)
		return true
	}
	if !errors.Is(err, ErrRebuild) {
		n.t.Fatalf("%s: Reconfigure(%v): %v", id, ids, err)
	}
	var hs HardState
	if q, ok := m.(*Quorum); ok {
		hs = q.HardState()
	}
	n.nodes[id] = tnQuorumLease(n.t, algo, cfg, hs)
	n.collect(id)
	return false
}

// A member that leaves, and one that joins, cost a Quorum cluster no
// election: every process takes the change in place at its own tick, and
// through it the leader leads and every member follows it. A machine
// built afresh for the new members (what the node did before
// Quorum.Reconfigure) grants no claimant for its first lease, and the
// cluster lost its leader (the node simulator: a cluster of 10 unserved
// for 10 to 20 s, when a crashed member left the electorate).
func TestQuorumReconfigureKeepsLeader(t *testing.T) {
	for _, algo := range Algorithms() {
		t.Run(algo, func(t *testing.T) {
			ids := tnIDs(5)
			n := newTnet(t, ids, func(id ID) Machine { return tnQuorumOf(t, algo, id, ids, HardState{}) })
			for _, id := range ids {
				n.campaign(id)
			}
			var leader ID
			n.runUntil(200, "one leader followed by all", func() bool {
				ls := n.leaders()
				if len(ls) != 1 {
					return false
				}
				leader = ls[0]
				return n.agree(leader)
			})
			gone := ids[0]
			if gone == leader {
				gone = ids[1]
			}
			// steady checks every live process at every tick.
			steady := func(step string, members []ID) {
				t.Helper()
				for _, id := range members {
					if n.crashed[id] {
						continue
					}
					st := n.state(id)
					if id == leader && st.Role != Leader || id != leader && st.Leader != leader {
						t.Fatalf("%s: %s is %v following %q, want %s leading throughout; states: %s", step, id, st.Role, st.Leader, leader, n.states())
					}
				}
			}
			n.crash(gone)
			left := slices.DeleteFunc(slices.Clone(ids), func(id ID) bool { return id == gone })
			for _, id := range left {
				// One process a tick, as members of a cluster drop a
				// departed one at their own times.
				if !n.reconfigureOrRebuild(algo, id, left) {
					t.Fatalf("%s: a member less was not taken in place", id)
				}
				n.run(1)
				steady("while the members drop "+string(gone), left)
			}
			for range 30 {
				n.run(1)
				steady("after the members dropped "+string(gone), left)
			}
			// A joiner ranked below every member (HighestID): it must
			// follow, and no one may lose the leader meanwhile.
			joiner := ID("/")
			all := append(slices.Clone(left), joiner)
			n.ids = append(n.ids, joiner)
			n.nodes[joiner] = tnQuorumOf(t, algo, joiner, all, HardState{})
			for _, id := range left {
				if !n.reconfigureOrRebuild(algo, id, all) {
					t.Fatalf("%s: a member more was not taken in place", id)
				}
				n.run(1)
				steady("while the members add "+string(joiner), left)
			}
			n.runUntil(100, "the joiner following "+string(leader), func() bool { return n.state(joiner).Leader == leader })
			for range 30 {
				n.run(1)
				steady("after the join", all)
			}
		})
	}
}

// What Reconfigure refuses, leaving the machine as it was: a change of two
// members or more (ErrRebuild: the driver builds a new machine), another
// process's ID (ErrBadID), a bad config; and what it takes, a member less
// and a new lease. And a Quorum
// around a machine it cannot rebuild (NewQuorum) takes a change only when
// that machine is a Reconfigurer.
func TestQuorumReconfigureRefuses(t *testing.T) {
	ids := tnIDs(5)
	q := tnQuorumOf(t, "bully", "4", ids, HardState{}).(*Quorum)
	before := fmt.Sprintf("%+v %v %d", q.HardState(), q.cfg.Peers, q.majority)
	for _, tt := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"two members gone", tnCfg("4", tnSplit("2 3 4")), ErrRebuild},
		{"one gone, one new", tnCfg("4", tnSplit("1 2 3 4 5")), ErrRebuild},
		{"another process", tnCfg("3", ids), ErrBadID},
		{"not a member", tnCfg("4", tnSplit("0 1 2 3")), ErrBadID},
	} {
		if err := q.Reconfigure(tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if now := fmt.Sprintf("%+v %v %d", q.HardState(), q.cfg.Peers, q.majority); now != before {
			t.Errorf("%s: the machine changed: %s, was %s", tt.name, now, before)
		}
	}
	if err := q.Reconfigure(tnCfg("4", tnSplit("1 2 3 4"))); err != nil || q.majority != 3 {
		t.Errorf("one member gone: %v, majority %d; want taken, majority 3", err, q.majority)
	}
	if err := q.Reconfigure(Config{ID: "4", Peers: tnSplit("1 2 3 4"), HeartbeatTicks: 2, TimeoutTicks: 14}); err != nil || q.lease != 14 {
		t.Errorf("a longer lease: %v, lease %d; want taken, 14", err, q.lease)
	}
	bare := tnMust[*Quorum](t)(NewQuorum(tnCfg("4", ids), tnMust[*Bully](t)(NewBully(tnCfg("4", ids))), HardState{}))
	if err := bare.Reconfigure(tnCfg("4", tnSplit("1 2 3 4"))); !errors.Is(err, ErrRebuild) {
		t.Errorf("NewQuorum around a Bully: %v, want ErrRebuild", err)
	}
	inv := tnMust[*Invitation](t)(NewInvitation(tnCfg("4", ids)))
	wrapped := tnMust[*Quorum](t)(NewQuorum(tnCfg("4", ids), inv, HardState{}))
	if err := wrapped.Reconfigure(tnCfg("4", tnSplit("1 2 3 4"))); err != nil || !slices.Equal(inv.cfg.Peers, tnSplit("1 2 3 4")) {
		t.Errorf("NewQuorum around an Invitation: %v, inner peers %v; want both reconfigured", err, inv.cfg.Peers)
	}
}

// TestQuorumReconfigureChaos: members leave and join one at a time, and
// each process takes each change at its own time, in place, or by a new
// machine with its stored HardState when the change is more than one
// member from what its machine has (a member that left and comes back); a
// member that left keeps running with the members it last had. A change
// is made once every live member has taken the last one, as one at a time
// in Raft. Meanwhile processes crash and restart (with the latest
// members), are cut off and healed, messages are lost and processes
// campaign. At every tick at most one process is Leader: the majorities
// of two configurations one change apart share a process, which backs one
// claimant at a time. Each process takes a lease of its own (6 to 16
// ticks) with each change, as the node derives its timeout from its own
// RTTs. Then, with the faults over, the live members elect one leader
// that all of them follow.
func TestQuorumReconfigureChaos(t *testing.T) {
	for _, algo := range []string{"bully", "ring", "stable", "candidate", "invitation"} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/seed%d", algo, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				universe := tnIDs(9)
				configs := [][]ID{universe[:3+int(seed%4)]}
				at := map[ID]int{} // the configuration each process took last
				cfgOf := func(id ID, ids []ID) Config {
					return Config{ID: id, Peers: slices.Clone(ids), HeartbeatTicks: 2, TimeoutTicks: 6 + rng.IntN(11)}
				}
				var n *tnet
				fresh := func(id ID) Machine {
					var hs HardState
					if q, ok := n.nodes[id].(*Quorum); ok {
						hs = q.HardState()
					}
					if c := configs[at[id]]; slices.Contains(c, id) {
						return tnQuorumLease(t, algo, cfgOf(id, c), hs)
					}
					return tnPassive{}
				}
				n = newTnet(t, universe, func(id ID) Machine {
					if slices.Contains(configs[0], id) {
						return tnQuorumOf(t, algo, id, configs[0], HardState{})
					}
					return tnPassive{}
				})
				leaders := func(step string) {
					var ls []ID
					for _, id := range universe {
						if !n.crashed[id] && n.state(id).Role == Leader {
							ls = append(ls, id)
						}
					}
					if len(ls) > 1 {
						t.Fatalf("%s: %v lead at once; configurations %v, each process's %v; states: %s", step, ls, configs, at, n.states())
					}
				}
				adopt := func(id ID) {
					last := len(configs) - 1
					if at[id] == last {
						return
					}
					at[id] = last
					c := configs[last]
					if n.crashed[id] || !slices.Contains(c, id) {
						return // it restarts with c; or it left, and runs on
					}
					if _, ok := n.nodes[id].(*Quorum); ok {
						n.reconfigureCfg(algo, cfgOf(id, c))
					} else {
						n.nodes[id] = tnQuorumLease(t, algo, cfgOf(id, c), HardState{}) // a newcomer
					}
				}
				n.faults(rng, 300, fresh, func(i int) {
					leaders(fmt.Sprintf("tick %d", i))
					last := configs[len(configs)-1]
					taken := !slices.ContainsFunc(last, func(id ID) bool { return !n.crashed[id] && at[id] != len(configs)-1 })
					if i%25 == 0 && taken {
						// One change: a member in or out.
						id := universe[rng.IntN(len(universe))]
						next := slices.Clone(last)
						if j := slices.Index(next, id); j >= 0 && len(next) > 2 {
							next = slices.Delete(next, j, j+1)
						} else if j < 0 {
							next = append(next, id)
						}
						configs = append(configs, next)
					}
					for _, id := range universe {
						if rng.IntN(8) == 0 {
							adopt(id)
						}
					}
				})
				last := configs[len(configs)-1]
				for _, id := range universe {
					switch {
					case !slices.Contains(last, id):
						n.crash(id) // gone for good
					case n.crashed[id]:
						at[id] = len(configs) - 1
						n.restart(id, fresh(id))
					default:
						adopt(id)
					}
				}
				for range 300 {
					n.run(1)
					leaders("after the faults")
				}
				ls := n.leaders()
				if len(ls) != 1 || !n.agree(ls[0]) {
					t.Fatalf("300 ticks after the faults: leaders %v, configuration %v; states: %s", ls, last, n.states())
				}
			})
		}
	}
}

// tnLeads is an inner machine that says Leader while *on (the inner
// election's decision, taken at once), and nothing else.
type tnLeads struct {
	id ID
	on *bool
}

func (tnLeads) Step(Message) {}
func (tnLeads) Tick()        {}
func (tnLeads) Campaign()    {}
func (l tnLeads) Ready() Ready {
	if *l.on {
		return Ready{State: State{Role: Leader, Leader: l.id}}
	}
	return Ready{}
}

// Members may have different leases (the node derives each one's timeout
// from its own RTTs, and a ring's from its size): a claimant counts a
// follower's grant for no longer than the lease that follower promised
// (CLAIM_ACK's Capacity), so a claimant with the longer lease is never
// Leader beside another that the followers backed once their shorter
// promises ran out. Before, the claimant counted its own lease of 20
// ticks on promises of 12 (10 + PromiseMargin), and two processes led at
// once for 7 ticks.
func TestQuorumLeasesDiffer(t *testing.T) {
	ids := tnIDs(3)
	lease := map[ID]int{"0": 10, "1": 10, "2": 20}
	on := map[ID]*bool{"0": new(bool), "1": new(bool), "2": new(bool)}
	*on["2"] = true
	n := newTnet(t, ids, func(id ID) Machine {
		cfg := Config{ID: id, Peers: ids, HeartbeatTicks: 2, TimeoutTicks: lease[id]}
		return tnMust[*Quorum](t)(NewQuorum(cfg, tnLeads{id, on[id]}, HardState{}))
	})
	n.runUntil(100, "2 leading", func() bool { return n.agree("2") })
	n.isolate("2")
	*on["1"] = true // 1's inner election now names it
	n.collect("1")
	for i := range 60 {
		n.run(1)
		if n.state("2").Role == Leader && n.state("1").Role == Leader {
			t.Fatalf("tick %d after 2 was cut off: 1 and 2 lead at once; states: %s", i, n.states())
		}
	}
	if n.state("1").Role != Leader {
		t.Fatalf("1 does not lead the majority side: %s", n.states())
	}
}

// A member that leaves after this process voted for it and promised it
// (found in review, and by FuzzMachine): the promise still binds until it
// runs out, but the state names no one outside the cluster, a refusal
// names this process rather than the departed one, and the vote becomes
// this process's own, so that a restart with the stored HardState is one
// of the new members' and grants no one else in that term.
func TestQuorumVoteForDepartedMember(t *testing.T) {
	ids := tnIDs(5)
	q := tnQuorumOf(t, "bully", "0", ids, HardState{}).(*Quorum)
	for range 13 {
		q.Tick() // past the first lease
	}
	q.Ready()
	q.Step(Message{Type: MsgClaim, From: "3", To: "0", Term: 1, Election: ElectionID{Source: "3", Seq: 1}})
	if st := q.Ready().State; st.Leader != "3" {
		t.Fatalf("state %+v after 3's claim, want following 3", st)
	}
	left := tnSplit("0 1 2 4")
	if err := q.Reconfigure(tnCfg("0", left)); err != nil {
		t.Fatal(err)
	}
	hs := q.HardState()
	if hs != (HardState{Term: 1, Vote: "0"}) {
		t.Errorf("HardState %+v after 3 left, want term 1 voted for 0", hs)
	}
	q.Step(Message{Type: MsgClaim, From: "1", To: "0", Term: 2, Election: ElectionID{Source: "1", Seq: 1}})
	rd := q.Ready()
	if rd.State.Leader != None {
		t.Errorf("state %+v names a member that left", rd.State)
	}
	acks := slices.DeleteFunc(slices.Clone(rd.Messages), func(m Message) bool { return m.Type != MsgClaimAck })
	if len(acks) != 1 || acks[0].Leader != "0" {
		t.Errorf("answer to 1's claim while bound to 3: %v, want one refusal naming 0", tnFmtLongs(acks))
	}
	if _, err := NewQuorum(tnCfg("0", left), tnMust[*Bully](t)(NewBully(tnCfg("0", left))), hs); err != nil {
		t.Errorf("restart with the stored HardState: %v", err)
	}
}

// A grant from a member that has left counts no more: 4 claims among
// {1, 2, 3, 4} with 3's grant alone (two of four, no majority); with 3
// gone, the majority of {1, 2, 4} is two, which 3's stale grant would have
// made.
func TestQuorumGrantOfDepartedMember(t *testing.T) {
	ids := tnSplit("1 2 3 4")
	q := tnQuorumOf(t, "bully", "4", ids, HardState{}).(*Quorum)
	for range 13 {
		q.Tick()
	}
	q.Ready()
	q.Campaign() // 4 ranks highest: its bully leads, and Quorum claims
	var claim Message
	for i := 0; i < 20 && claim.Type != MsgClaim; i++ {
		for _, m := range q.Ready().Messages {
			if m.Type == MsgClaim && m.To == "3" {
				claim = m
			}
		}
		q.Tick()
	}
	if claim.Type != MsgClaim {
		t.Fatal("no CLAIM to 3")
	}
	q.Step(Message{Type: MsgClaimAck, From: "3", To: "4", Term: claim.Term, Leader: "4", Election: claim.Election, Capacity: 10})
	if st := q.Ready().State; st.Role == Leader {
		t.Fatalf("leads on 2 of 4: %+v", st)
	}
	if err := q.Reconfigure(tnCfg("4", tnSplit("1 2 4"))); err != nil {
		t.Fatal(err)
	}
	if st := q.Ready().State; st.Role == Leader {
		t.Errorf("leads {1, 2, 4} on the grant of 3, which left: %+v", st)
	}
}

// tnLeadsR is tnLeads that takes any configuration in place.
type tnLeadsR struct{ tnLeads }

func (tnLeadsR) Reconfigure(Config) error { return nil }

// A follower whose lease Reconfigure shortened keeps the longer promise
// it renews to the same claimant: the claimant counted the grants acked
// for the longer lease, and the ack that would tell it of the shorter one
// may be lost. Found in review: the renewal cut the promise to the new
// lease, and 0 led beside 2 once 2 was cut off, 8 ticks into 2's lease.
func TestQuorumShortenedLeaseKeepsPromise(t *testing.T) {
	ids := tnIDs(3)
	on := map[ID]*bool{"0": new(bool), "1": new(bool), "2": new(bool)}
	*on["2"] = true
	cfg := func(id ID, lease int) Config {
		return Config{ID: id, Peers: ids, HeartbeatTicks: 2, TimeoutTicks: lease}
	}
	n := newTnet(t, ids, func(id ID) Machine {
		return tnMust[*Quorum](t)(NewQuorum(cfg(id, 20), tnLeadsR{tnLeads{id, on[id]}}, HardState{}))
	})
	n.runUntil(100, "2 leading", func() bool { return n.agree("2") })
	n.run(1)
	for _, id := range []ID{"0", "1"} {
		if err := n.nodes[id].(*Quorum).Reconfigure(cfg(id, 8)); err != nil {
			t.Fatal(err)
		}
		n.collect(id)
	}
	// The followers' acks to 2 are lost; one more round of 2's reaches
	// them, and then 2 is cut off.
	n.cut[[2]ID{"0", "2"}], n.cut[[2]ID{"1", "2"}] = true, true
	n.run(2)
	n.isolate("2")
	*on["0"] = true
	n.collect("0")
	for i := range 40 {
		n.run(1)
		if n.state("2").Role == Leader && n.state("0").Role == Leader {
			t.Fatalf("tick %d after 2 was cut off: 0 and 2 lead at once; 2's lease left %d; states: %s", i, n.nodes["2"].(*Quorum).LeaseLeft(), n.states())
		}
	}
	if n.state("0").Role != Leader {
		t.Fatalf("0 does not lead the majority side: %s", n.states())
	}
}

// tnStuck is an inner machine that campaigns for ever.
type tnStuck struct{}

func (tnStuck) Step(Message) {}
func (tnStuck) Tick()        {}
func (tnStuck) Campaign()    {}
func (tnStuck) Ready() Ready { return Ready{State: State{Role: Candidate}} }

// A leader's claim stands while the inner machine Reconfigure built for
// it campaigns, for two leases at most: one whose election never ends
// does not keep the leader leading for ever.
func TestQuorumStandingClaimEnds(t *testing.T) {
	ids := tnIDs(3)
	on := map[ID]*bool{"0": new(bool), "1": new(bool), "2": new(bool)}
	*on["2"] = true
	n := newTnet(t, ids, func(id ID) Machine {
		return tnMust[*Quorum](t)(NewQuorum(tnCfg(id, ids), tnLeads{id, on[id]}, HardState{}))
	})
	n.runUntil(100, "2 leading", func() bool { return n.agree("2") })
	q := n.nodes["2"].(*Quorum)
	q.fresh = func(Config) (Machine, error) { return tnStuck{}, nil }
	if err := q.Reconfigure(tnCfg("2", ids)); err != nil {
		t.Fatal(err)
	}
	lease := q.lease
	for i := range 4 * lease {
		n.run(1)
		switch leads := n.state("2").Role == Leader; {
		case i < lease && !leads:
			t.Fatalf("tick %d: 2 stopped leading while its new inner machine campaigns: %s", i, n.states())
		case i >= 3*lease+PromiseMargin && leads:
			t.Fatalf("tick %d: 2 still leads, its inner machine campaigning since the change: %s", i, n.states())
		}
	}
}

// Hold keeps a new machine from granting for a promise its predecessor
// made for a longer lease than the new machine's first lease covers.
func TestQuorumHold(t *testing.T) {
	ids := tnSplit("a b c")
	old := tnMust[*Quorum](t)(NewQuorum(Config{ID: "c", Peers: ids, HeartbeatTicks: 2, TimeoutTicks: 30}, tnPassive{}, HardState{}))
	for range 33 {
		old.Tick()
	}
	old.Ready()
	old.Step(Message{Type: MsgClaim, From: "a", To: "c", Term: 1, Election: ElectionID{Source: "a", Seq: 1}})
	if l := old.PromiseLeft(); l != 32 {
		t.Fatalf("PromiseLeft %d after a grant, want the lease 30 + %d", l, PromiseMargin)
	}
	q := tnMust[*Quorum](t)(NewQuorum(Config{ID: "c", Peers: ids, HeartbeatTicks: 2, TimeoutTicks: 10}, tnPassive{}, old.HardState()))
	q.Hold(old.PromiseLeft())
	for i := range 40 {
		q.Step(Message{Type: MsgClaim, From: "b", To: "c", Term: 2, Election: ElectionID{Source: "b", Seq: uint64(i + 1)}})
		granted := q.HardState().Vote == "b"
		if granted && i < 32 {
			t.Fatalf("granted b %d ticks after the replacement, within the old promise to a (32)", i)
		}
		if granted {
			return
		}
		q.Tick()
		q.Ready()
	}
	t.Fatal("never granted b after the old promise ran out")
}
