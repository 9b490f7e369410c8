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
	if hs.Vote != None && !slices.Contains(ids, hs.Vote) {
		hs.Vote = id
	}
	return tnMust[Machine](t)(New(algo, tnCfg(id, slices.Clone(ids)), Options{Quorum: true, HardState: hs}))
}

// reconfigureOrRebuild gives id the members ids as a driver does: in place
// when the machine takes the change (Reconfigurer), else a new machine
// with the stored HardState. It reports whether it was in place.
func (n *tnet) reconfigureOrRebuild(algo string, id ID, ids []ID) bool {
	n.t.Helper()
	m := n.nodes[id]
	err := ErrRebuild
	if r, ok := m.(Reconfigurer); ok {
		err = r.Reconfigure(tnCfg(id, slices.Clone(ids)))
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
	n.nodes[id] = tnQuorumOf(n.t, algo, id, ids, hs)
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
// members or more, or of the lease (ErrRebuild: the driver builds a new
// machine), another process's ID (ErrBadID), a bad config. And a Quorum
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
		{"a longer lease", Config{ID: "4", Peers: ids, HeartbeatTicks: 2, TimeoutTicks: 12}, ErrRebuild},
		{"a shorter lease", Config{ID: "4", Peers: ids, HeartbeatTicks: 2, TimeoutTicks: 8}, ErrRebuild},
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
// claimant at a time. Then, with the faults over, the live members elect
// one leader that all of them follow.
func TestQuorumReconfigureChaos(t *testing.T) {
	for _, algo := range []string{"bully", "ring", "stable", "candidate", "invitation"} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/seed%d", algo, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				universe := tnIDs(9)
				configs := [][]ID{universe[:3+int(seed%4)]}
				at := map[ID]int{} // the configuration each process took last
				var n *tnet
				fresh := func(id ID) Machine {
					var hs HardState
					if q, ok := n.nodes[id].(*Quorum); ok {
						hs = q.HardState()
					}
					if c := configs[at[id]]; slices.Contains(c, id) {
						return tnQuorumOf(t, algo, id, c, hs)
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
						n.reconfigureOrRebuild(algo, id, c)
					} else {
						n.nodes[id] = tnQuorumOf(t, algo, id, c, HardState{}) // a newcomer
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
