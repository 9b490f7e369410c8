package classic

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestAlgorithms(t *testing.T) {
	want := []string{"bully", "ring", "ring-max", "next-in-line", "candidate", "invitation", "echo", "stable"}
	got := Algorithms()
	if !slices.Equal(got, want) {
		t.Fatalf("Algorithms() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if Algorithms()[0] != "bully" {
		t.Fatal("Algorithms returns a slice that aliases the package's list")
	}
}

// TestNewEveryName builds every algorithm for each process of a 5-peer
// cluster, bare and with Quorum.
func TestNewEveryName(t *testing.T) {
	ids := tnIDs(5)
	wantType := map[string]Machine{
		"bully": (*Bully)(nil), "ring": (*Ring)(nil), "ring-max": (*Ring)(nil),
		"next-in-line": (*NextInLine)(nil), "candidate": (*CandidateElection)(nil),
		"invitation": (*Invitation)(nil), "echo": (*Echo)(nil), "stable": (*Stable)(nil),
	}
	for _, name := range Algorithms() {
		t.Run(name, func(t *testing.T) {
			for _, id := range ids {
				m, err := New(name, tnCfg(id, ids), Options{})
				if err != nil {
					t.Fatalf("New(%q) for %s: %v", name, id, err)
				}
				if got, want := reflect.TypeOf(m), reflect.TypeOf(wantType[name]); got != want {
					t.Fatalf("New(%q) is a %v, want %v", name, got, want)
				}
				hs := HardState{Term: 7, Vote: ids[2]}
				q, err := New(name, tnCfg(id, ids), Options{Quorum: true, HardState: hs})
				if err != nil {
					t.Fatalf("New(%q) with Quorum for %s: %v", name, id, err)
				}
				qm, ok := q.(*Quorum)
				if !ok {
					t.Fatalf("New(%q) with Quorum is a %T, want *Quorum", name, q)
				}
				if got := reflect.TypeOf(qm.inner); got != reflect.TypeOf(wantType[name]) {
					t.Fatalf("the Quorum wraps a %v, want %v", got, reflect.TypeOf(wantType[name]))
				}
				if qm.HardState() != hs {
					t.Fatalf("HardState %+v, want the given %+v", qm.HardState(), hs)
				}
			}
		})
	}
}

func TestNewUnknownName(t *testing.T) {
	for _, name := range []string{"", "Bully", "raft", "ring max", "bully "} {
		_, err := New(name, tnCfg("0", tnIDs(5)), Options{})
		if !errors.Is(err, ErrUnknownAlgorithm) {
			t.Fatalf("New(%q): error %v, want ErrUnknownAlgorithm", name, err)
		}
		for _, valid := range Algorithms() {
			if !strings.Contains(err.Error(), valid) {
				t.Fatalf("New(%q): error %q does not list %q", name, err, valid)
			}
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Fatalf("New(%q): error %q does not quote the name given", name, err)
		}
	}
}

// TestNewPassesErrorsOn: New leaves validation to the constructors and
// returns their errors.
func TestNewPassesErrorsOn(t *testing.T) {
	ids := tnIDs(5)
	for _, name := range Algorithms() {
		_, err := New(name, tnCfg("x", ids), Options{})
		if !errors.Is(err, ErrBadID) || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%q) with an ID outside Peers: error %v, want ErrBadID naming %q", name, err, name)
		}
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		opts Options
		want error
	}{
		{"next-in-line", tnCfg("0", ids), Options{ListLen: -1}, ErrBadOption},
		{"candidate", tnCfg("0", ids), Options{Candidates: []ID{"1", "z"}}, ErrBadCandidates},
		{"echo", tnCfg("0", ids), Options{Neighbours: []ID{"0"}}, ErrBadNeighbours},
		{"bully", Config{ID: "0", Peers: ids, HeartbeatTicks: 5, TimeoutTicks: 5}, Options{}, ErrBadTicks},
		{"echo", tnCfg("0", ids), Options{Quorum: true, HardState: HardState{Vote: "z"}}, ErrBadID},
		// Echo has no heartbeats, so only Quorum minds the ticks.
		{"echo", Config{ID: "0", Peers: ids, HeartbeatTicks: 5, TimeoutTicks: 5}, Options{Quorum: true}, ErrBadTicks},
	} {
		if _, err := New(tt.name, tt.cfg, tt.opts); !errors.Is(err, tt.want) {
			t.Errorf("New(%q, %+v): error %v, want %v", tt.name, tt.opts, err, tt.want)
		}
	}
}

// TestNewDefaults checks the documented defaults of Options.
func TestNewDefaults(t *testing.T) {
	ids := tnIDs(5)
	mk := func(name string, opts Options) func(ID) Machine {
		return func(id ID) Machine { return tnMust[Machine](t)(New(name, tnCfg(id, ids), opts)) }
	}

	// next-in-line: the leader publishes DefaultListLen successors, or
	// ListLen when given.
	for _, tt := range []struct{ listLen, want int }{{0, DefaultListLen}, {1, 1}, {10, 4}} {
		n := newTnet(t, ids, mk("next-in-line", Options{ListLen: tt.listLen}))
		n.campaign("0")
		n.runUntil(100, "led by 4", func() bool { return n.agree("4") })
		if got := n.nodes["4"].(*NextInLine).FailoverList(); len(got) != tt.want {
			t.Errorf("ListLen %d: failover list %v, want %d entries", tt.listLen, got, tt.want)
		}
	}

	// candidate: every member may lead, unless Candidates says otherwise.
	c := tnMust[Machine](t)(New("candidate", tnCfg("0", ids), Options{})).(*CandidateElection)
	for _, id := range ids {
		if !c.IsCandidate(id) {
			t.Errorf("candidate: %s is not a candidate by default", id)
		}
	}
	c = tnMust[Machine](t)(New("candidate", tnCfg("0", ids), Options{Candidates: []ID{"1", "2"}})).(*CandidateElection)
	if c.IsCandidate("4") || !c.IsCandidate("2") {
		t.Error("candidate: Options.Candidates is not used")
	}

	// echo: a full mesh (the source sends ELECTION to all four others), and
	// capacity 1 (the result carries it).
	n := newTnet(t, ids, mk("echo", Options{}))
	mark := n.mark()
	n.campaign("0")
	if got := tnTos(n.since(mark, MsgElection)); !slices.Equal(got, tnSplit("1 2 3 4")) {
		t.Errorf("echo: the source sent ELECTION to %v, want every other member", got)
	}
	n.settle()
	n.wantLeader("echo with default capacities", "4")
	if cs := n.since(mark, MsgCoordinator); len(cs) == 0 || cs[0].Capacity != 1 {
		t.Errorf("echo: COORDINATOR %v, want the default capacity 1", cs)
	}

	// echo with Neighbours and Capacity: a line 0-1-2-3-4 where 1 has the
	// largest capacity.
	n = newTnet(t, ids, func(id ID) Machine {
		i := slices.Index(ids, id)
		var nbs []ID
		if i > 0 {
			nbs = append(nbs, ids[i-1])
		}
		if i < len(ids)-1 {
			nbs = append(nbs, ids[i+1])
		}
		capacity := uint64(0) // the default, 1
		if id == "1" {
			capacity = 10
		}
		return tnMust[Machine](t)(New("echo", tnCfg(id, ids), Options{Neighbours: nbs, Capacity: capacity}))
	})
	mark = n.mark()
	n.campaign("0")
	if got := tnTos(n.since(mark, MsgElection)); !slices.Equal(got, tnSplit("1")) {
		t.Errorf("echo on a line: the source sent ELECTION to %v, want only its neighbour 1", got)
	}
	n.settle()
	n.wantLeader("echo on a line", "1")
}

// TestNewElects runs an election through the factory for every algorithm,
// bare and with Quorum: five processes 0..4 with HighestID agree on 4; then
// 4 crashes and the rest agree on 3. Invitation promises one leader per
// group but not the highest-ranked one, so there any single live leader
// will do.
func TestNewElects(t *testing.T) {
	for _, name := range Algorithms() {
		for _, quorum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/quorum=%v", name, quorum), func(t *testing.T) {
				ids := tnIDs(5)
				n := newTnet(t, ids, func(id ID) Machine {
					return tnMust[Machine](t)(New(name, tnCfg(id, ids), Options{Quorum: quorum}))
				})
				// The ring skips dead successors and echo learns of dead
				// neighbours through the driver's UNREACHABLE.
				n.unreachable = name == "ring" || name == "ring-max" || name == "echo"
				agreeOn := func(want ID) func() bool {
					return func() bool {
						if name == "invitation" {
							ls := n.followed()
							return len(ls) == 1 && ls[0] != None && !n.crashed[ls[0]] && n.agree(ls[0])
						}
						return n.agree(want)
					}
				}

				n.campaign("0")
				ticks := n.runUntil(500, "agreed on 4", agreeOn("4"))
				leader := n.state("0").Leader
				t.Logf("%s leads after %d ticks", leader, ticks)
				n.crash(leader)
				if leader == "0" {
					t.Fatal("the test assumes 0 does not lead; it campaigns after the crash")
				}
				if name == "echo" {
					// Echo has no heartbeats: the driver notices the
					// failure and calls Campaign.
					n.campaign("0")
				}
				ticks = n.runUntil(500, "agreed on 3 after "+string(leader)+" crashed", agreeOn("3"))
				t.Logf("%s leads %d ticks after %s crashed", n.state("0").Leader, ticks, leader)
				n.run(50)
				if !agreeOn("3")() {
					t.Fatalf("the agreement did not last: %s", n.states())
				}
			})
		}
	}
}
